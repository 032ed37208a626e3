"""W&B UI history exports: the CSV behind a line plot's "Export as CSV".

The header is ``Step`` then, per run and metric, ``<run> - <metric>`` and usually its
``<run> - <metric>__MIN`` / ``__MAX`` band (the spread of the points W&B bucketed for the
plot). One file may hold several runs: each becomes a :class:`~proxydiag.run.Run`. The band
columns are not points and are skipped; an empty cell is no row. A run name may itself
contain ``" - "``: the split is at the last one (W&B metric keys do not contain it). The
file is parsed by the CSV reader (:mod:`proxydiag.ingest.tabular.csv`), with its rules for damage.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl

from proxydiag.errors import IngestError
from proxydiag.ingest import ReadContext
from proxydiag.ingest.contract import source_run
from proxydiag.ingest.tabular import csv, tables
from proxydiag.run import Run, keys

NAME = "wandb_csv"
_SEP = " - "
_BAND = re.compile(r"__(MIN|MAX)$")
_STEP = ("Step", "_step", "step")


def _header(path: Path) -> list[str] | None:
    try:
        with path.open("rb") as fh:
            first = fh.readline(65536)
    except OSError:
        return None
    text = first.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace").strip()
    return [c.strip().strip('"') for c in text.split(",")] if text else None


def can_read(source: str | Path) -> bool:
    """A CSV whose first column is ``Step`` and whose other columns are ``<run> - <metric>``.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "export.csv"
    >>> _ = p.write_text('"Step","exp-1 - loss","exp-1 - loss__MIN"\\n1,0.5,0.4\\n')
    >>> can_read(p)
    True
    """
    path = Path(source)
    if not path.is_file() or path.suffix.lower() != ".csv":
        return False
    cells = _header(path)
    if not cells or len(cells) < 2 or cells[0] not in _STEP:
        return False
    return all(_SEP in c for c in cells[1:])


def split_column(column: str) -> tuple[str, str, bool]:
    """``(run, metric, is_band)`` of an export column.

    >>> split_column("lr=1e-3 - seed 1 - train/loss__MAX")
    ('lr=1e-3 - seed 1', 'train/loss', True)
    """
    run, _, metric = column.rpartition(_SEP)
    is_band = bool(_BAND.search(metric))
    return run, _BAND.sub("", metric), is_band


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    """One run per run name in the export.

    The file is read by :func:`proxydiag.ingest.tabular.csv.read_table`, so damage is handled as for
    any CSV: a cut last line is dropped with a warning; a ragged row or a bad cell is an error
    naming ``file:line`` (quoted cells spanning lines counted) and the column.
    """
    path = Path(source)
    raw, notes = csv.read_table(path, skip=lambda column: split_column(column)[2], holes=False)
    coded = keys.of(raw.get_column("key"))
    # band columns were skipped unread: every key left is a (run, metric) column
    split = [split_column(c)[:2] for c in coded.names]
    bands = sorted({split_column(c)[1] for c in notes.skipped_columns})
    names = list(dict.fromkeys(run for run, _ in split))
    runs = []
    for name, rows in zip(names, _split_runs(raw, coded, split, names), strict=True):
        if rows.height == 0:
            continue
        attrs = {
            "wandb_export": True,
            "band_columns_skipped": bands,
            **_notes_of(name, notes).attrs(),
        }
        own = path if len(names) == 1 else None  # one sidecar cannot name several runs
        run = source_run(
            rows,
            path,
            ctx,
            fmt=NAME,
            name=name,
            attrs=attrs,
            sidecar_of=own,
            monotonic=notes.monotonic,
        )
        runs.append(run)
    if not runs:
        raise IngestError(f"{path}: W&B CSV export holds no values (every cell is empty)")
    return runs


def _split_runs(
    raw: pl.DataFrame, coded: keys.Codes, split: list[tuple[str, str]], names: list[str]
) -> list[pl.DataFrame]:
    """The rows of each run in ``names``, keyed by metric name, in one pass over the rows
    (key code ``c`` is column ``split[c] = (run, metric)``); file order kept within a run.

    >>> raw = pl.DataFrame({"step": [1, 1, 2], "key": ["a - loss", "b - loss", "a - lr"],
    ...                     "value": [0.5, 0.7, 1e-3]})
    >>> parts = _split_runs(raw, keys.of(raw["key"]),
    ...                     [("a", "loss"), ("b", "loss"), ("a", "lr")], ["a", "b"])
    >>> [p["key"].cast(pl.Utf8).to_list() for p in parts]
    [['loss', 'lr'], ['loss']]
    """
    index = {name: i for i, name in enumerate(names)}
    metrics: list[list[str]] = [[] for _ in names]  # each run's metric names, in code order
    renumber = np.zeros(len(split), dtype=np.int64)  # a key code -> its index in its run's
    run_of_code = np.zeros(len(split), dtype=np.int64)
    for code, (run, metric) in enumerate(split):
        run_of_code[code] = index[run]
        renumber[code] = len(metrics[index[run]])
        metrics[index[run]].append(metric)
    per_row = coded.per_row()
    parts = raw.with_columns(
        pl.Series("_code", renumber[per_row]), pl.Series("_run", run_of_code[per_row])
    )
    by_run = parts.partition_by("_run", as_dict=True, maintain_order=True, include_key=False)
    empty = parts.clear().drop("_run")
    return [
        rows.with_columns(keys.enum_keys(rows["_code"].to_numpy(), metrics[i])).drop("_code")
        for i, rows in ((i, by_run.get((i,), empty)) for i in range(len(names)))
    ]


def _notes_of(name: str, notes: tables.Notes) -> tables.Notes:
    """The file's notes that concern run ``name``, in its metric names (``null`` cells counted
    in that run's own columns)."""
    ignored = [metric for run, metric, _ in map(split_column, notes.ignored_columns) if run == name]
    renamed = {
        split_column(new)[1]: split_column(old)[1]
        for new, old in notes.renamed_columns.items()
        if split_column(new)[0] == name
    }
    nulls = sum(n for column, n in notes.null_columns.items() if split_column(column)[0] == name)
    return tables.Notes(null_as_nan=nulls, ignored_columns=ignored, renamed_columns=renamed)
