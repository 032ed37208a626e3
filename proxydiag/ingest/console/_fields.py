"""Split ``key: value | key: value | ...`` lines into rows, fast when lines share a layout.

Megatron prints the same fields in the same order on every iteration line, so a block of
lines usually has one or a few *layouts*. For each layout (learnt from the first line not
yet matched) the lines are split once with ``str.split_exact`` and each field is checked
with a literal ``starts_with(key + ':')`` and cut with ``str.slice``; the wide result is
unpivoted into rows. Lines that match no layout (up to :data:`MAX_LAYOUTS` are tried) take
the generic path: split, explode, split at the separator. Both give the same rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: layouts tried per block before the generic path takes the rest
MAX_LAYOUTS = 4


def split_fields(
    lines: pl.DataFrame,
    *,
    sep: str,
    kv: str,
    keep: tuple[str, ...],
    column: str = "text",
    numbers: bool = False,
) -> pl.DataFrame:
    """Rows ``(*keep, key, raw)`` for every field after the first of each line.

    The trailing ``" |"`` Megatron prints is ignored; a field without ``kv`` is dropped;
    ``raw`` is the text after ``kv``, blanks included. Rows of one key keep the lines' order.

    With ``numbers``, rows ``(*keep, key, value)`` instead (``key`` categorical, ``value``
    Float64) when every line fits a layout and every value reads as a number, as on a
    Megatron block: the fields are cast column by column before they become rows, and the key
    column is written from codes (40% less work than casting the rows' text and hashing
    their keys). Otherwise the ``raw`` rows, for the caller's own checks.

    >>> f = pl.DataFrame({"line": [1, 2, 3], "text": [
    ...     " iteration 1/ 9 | lm loss: 2.5 | grad norm: 1.0 |",
    ...     " iteration 2/ 9 | lm loss: 2.4 | grad norm: 0.9 |",
    ...     " iteration 3/ 9 | grad norm: 0.8 |"]})
    >>> rows = split_fields(f, sep=" | ", kv=":", keep=("line",))
    >>> rows.with_columns(pl.col("raw").str.strip_chars()).sort("line", maintain_order=True).rows()
    [(1, 'lm loss', '2.5'), (1, 'grad norm', '1.0'), (2, 'lm loss', '2.4'), (2, 'grad norm', '0.9'),
     (3, 'grad norm', '0.8')]
    >>> split_fields(f, sep=" | ", kv=":", keep=("line",), numbers=True).rows()[-1]
    (3, 'grad norm', 0.8)
    """
    rest = lines.with_columns(pl.col(column).str.strip_chars_end(" |"))
    wides: list[tuple[pl.DataFrame, list[str]]] = []
    for _ in range(MAX_LAYOUTS):
        if rest.is_empty():
            break
        prefixes = _layout(rest[column][0], sep=sep, kv=kv)
        if prefixes is None:
            break
        wide, keys, rest = _apply(rest, prefixes, sep=sep, kv=kv, keep=keep, column=column)
        if wide.is_empty():
            break
        wides.append((wide, keys))
    if numbers and wides and rest.is_empty():
        parsed = [_numbers(wide, keys, keep) for wide, keys in wides]
        if all(p is not None for p in parsed):
            return _joined([p for p in parsed if p is not None], keep)
    out = [
        wide.unpivot(index=list(keep), on=keys, variable_name="key", value_name="raw")
        for wide, keys in wides
    ]
    if not rest.is_empty() or not out:
        out.append(_generic(rest, sep=sep, kv=kv, keep=keep, column=column))
    return _joined(out, keep)


def _joined(parts: list[pl.DataFrame], keep: tuple[str, ...]) -> pl.DataFrame:
    """The rows of the layouts' parts, in the lines' order."""
    if len(parts) == 1:
        return parts[0]
    return pl.concat(parts).sort(keep[0], maintain_order=True) if keep else pl.concat(parts)


def _numbers(wide: pl.DataFrame, keys: list[str], keep: tuple[str, ...]) -> pl.DataFrame | None:
    """The rows of one layout's fields as numbers, or None when some value is not one."""
    values = wide.select(pl.col(k).str.strip_chars().cast(pl.Float64, strict=False) for k in keys)
    if any(
        v.null_count() > wide.get_column(k).null_count()
        for k, v in zip(keys, values.iter_columns(), strict=True)
    ):
        return None
    rows = (
        wide.select(*keep)
        .hstack(values)
        .unpivot(index=list(keep), on=keys, variable_name="key", value_name="value")
    )
    codes = pl.Series(np.repeat(np.arange(len(keys), dtype=np.uint32), wide.height))
    return rows.with_columns(pl.Series("key", keys).cast(pl.Categorical).gather(codes))


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
    rest: pl.DataFrame,
    prefixes: list[str],
    *,
    sep: str,
    kv: str,
    keep: tuple[str, ...],
    column: str,
) -> tuple[pl.DataFrame, list[str], pl.DataFrame]:
    """The lines of ``rest`` that fit the layout ``prefixes`` as a wide frame (``keep`` and a
    text column per key), the keys, and the lines that do not fit."""
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
    return wide, keys, remaining


def _generic(
    rest: pl.DataFrame, *, sep: str, kv: str, keep: tuple[str, ...], column: str
) -> pl.DataFrame:
    fields = (
        rest.select(*keep, pl.col(column).str.split(sep).list.slice(1).alias("_f"))
        .explode("_f")
        .with_columns(pl.col("_f").str.split_exact(kv, 1).alias("_kv"))
        .unnest("_kv")
        .select(
            *keep, pl.col("field_0").str.strip_chars().alias("key"), pl.col("field_1").alias("raw")
        )
    )
    return fields.filter(pl.col("raw").is_not_null() & (pl.col("key") != ""))
