"""Split ``key: value | key: value | ...`` lines into rows, fast when lines share a layout.

Megatron prints the same fields in the same order on every iteration line, so a block of
lines usually has one or a few *layouts*. For each layout (learnt from the first line not
yet matched) the lines are split once with ``str.split_exact`` and each field is checked
with a literal ``starts_with(key + ':')`` and cut with ``str.slice``; the wide result is
unpivoted into rows. Lines that match no layout (up to :data:`MAX_LAYOUTS` are tried) take
the generic path: split, explode, split at the separator. Both give the same rows.
"""

from __future__ import annotations

import polars as pl

#: layouts tried per block before the generic path takes the rest
MAX_LAYOUTS = 4


def split_fields(
    lines: pl.DataFrame, *, sep: str, kv: str, keep: tuple[str, ...], column: str = "text"
) -> pl.DataFrame:
    """Rows ``(*keep, key, raw)`` for every field after the first of each line.

    The trailing ``" |"`` Megatron prints is ignored; a field without ``kv`` is dropped;
    ``raw`` is the text after ``kv``, blanks included. Rows of one key keep the lines' order.

    >>> f = pl.DataFrame({"line": [1, 2, 3], "text": [
    ...     " iteration 1/ 9 | lm loss: 2.5 | grad norm: 1.0 |",
    ...     " iteration 2/ 9 | lm loss: 2.4 | grad norm: 0.9 |",
    ...     " iteration 3/ 9 | grad norm: 0.8 |"]})
    >>> rows = split_fields(f, sep=" | ", kv=":", keep=("line",))
    >>> rows.with_columns(pl.col("raw").str.strip_chars()).sort("line", maintain_order=True).rows()
    [(1, 'lm loss', '2.5'), (1, 'grad norm', '1.0'), (2, 'lm loss', '2.4'), (2, 'grad norm', '0.9'), (3, 'grad norm', '0.8')]
    """
    rest = lines.with_columns(pl.col(column).str.strip_chars_end(" |"))
    out: list[pl.DataFrame] = []
    for _ in range(MAX_LAYOUTS):
        if rest.is_empty():
            break
        prefixes = _layout(rest[column][0], sep=sep, kv=kv)
        if prefixes is None:
            break
        matched, rest = _apply(rest, prefixes, sep=sep, kv=kv, keep=keep, column=column)
        if matched.is_empty():
            break
        out.append(matched)
    if not rest.is_empty():
        out.append(_generic(rest, sep=sep, kv=kv, keep=keep, column=column))
    if not out:
        return _generic(rest, sep=sep, kv=kv, keep=keep, column=column)
    if len(out) == 1:
        return out[0]
    return pl.concat(out).sort(keep[0], maintain_order=True) if keep else pl.concat(out)


def _layout(text: str | None, *, sep: str, kv: str) -> list[str] | None:
    """The field prefixes (``'lm loss:'``) of one line, None if it has no usable layout."""
    if text is None:
        return None
    parts = text.split(sep)[1:]
    if not parts or any(kv not in p for p in parts):
        return None
    prefixes = [p.split(kv, 1)[0] + kv for p in parts]
    keys = [p[: -len(kv)].strip() for p in prefixes]
    if len(set(keys)) != len(keys) or "" in keys:
        return None
    return prefixes


def _apply(
    rest: pl.DataFrame, prefixes: list[str], *, sep: str, kv: str, keep: tuple[str, ...],
    column: str,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    n = len(prefixes)
    split = rest.with_columns(pl.col(column).str.split_exact(sep, n + 1).alias("_s")).unnest("_s")
    fits = pl.all_horizontal(
        pl.col(f"field_{n + 1}").is_null(),
        *[pl.col(f"field_{i + 1}").str.starts_with(p) for i, p in enumerate(prefixes)],
    )
    fit = split.select(fits.fill_null(False)).to_series()
    keys = [p[: -len(kv)].strip() for p in prefixes]
    values = [
        pl.col(f"field_{i + 1}").str.slice(len(p)).alias(k)
        for i, (p, k) in enumerate(zip(prefixes, keys, strict=True))
    ]
    if fit.all():  # the usual case: one layout for the whole block, nothing to filter
        wide, remaining = split.select(*keep, *values), rest.clear()
    else:
        wide, remaining = split.filter(fit).select(*keep, *values), rest.filter(~fit)
    long = wide.unpivot(index=list(keep), on=keys, variable_name="key", value_name="raw")
    return long, remaining


def _generic(
    rest: pl.DataFrame, *, sep: str, kv: str, keep: tuple[str, ...], column: str
) -> pl.DataFrame:
    fields = (
        rest.select(*keep, pl.col(column).str.split(sep).list.slice(1).alias("_f"))
        .explode("_f")
        .with_columns(pl.col("_f").str.split_exact(kv, 1).alias("_kv"))
        .unnest("_kv")
        .select(*keep, pl.col("field_0").str.strip_chars().alias("key"), pl.col("field_1").alias("raw"))
    )
    return fields.filter(pl.col("raw").is_not_null() & (pl.col("key") != ""))
