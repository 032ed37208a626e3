"""W&B UI history exports: the CSV behind a line plot's "Export as CSV".

The header is ``Step`` then, per run and metric, ``<run> - <metric>`` and usually its
``<run> - <metric>__MIN`` / ``__MAX`` band (the spread of the points W&B bucketed for the
plot). One file may hold several runs: each becomes a :class:`~proxydiag.run.Run`. The band
columns are not points and are skipped; an empty cell is no row. A run name may itself
contain ``" - "``: the split is at the last one (W&B metric keys do not contain it).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from proxydiag.errors import IngestError
from proxydiag.ingest import ReadContext, tabular
from proxydiag.ingest.build import build_run, sidecar_for
from proxydiag.run import Run

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
    """One run per run name in the export."""
    path = Path(source)
    try:
        table = pl.read_csv(path, infer_schema=False, encoding="utf8-lossy")
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise IngestError(f"{path}: cannot read W&B CSV export ({exc}); re-export it from the W&B UI") from exc
    step_col, columns = table.columns[0], table.columns[1:]
    by_run: dict[str, dict[str, str]] = {}
    bands: set[str] = set()
    for column in columns:
        run, metric, is_band = split_column(column)
        if is_band:
            bands.add(metric)
        else:
            by_run.setdefault(run, {})[column] = metric
    runs = []
    for name, metrics in by_run.items():
        notes = tabular.Notes()
        sub = table.select(step_col, *metrics).rename(metrics)
        raw = tabular.wide_to_raw(sub, step=step_col, wall=None, locate=lambda r: f"{path}:{r + 2}", notes=notes)
        if raw.height == 0:
            continue
        attrs = {"wandb_export": True, "band_columns_skipped": sorted(bands), **notes.attrs()}
        sidecar = sidecar_for(path) if len(by_run) == 1 else None  # one sidecar cannot name several runs
        runs.append(
            build_run(raw, name=name, source=path, fmt=NAME, aliases=ctx.aliases, attrs=attrs, sidecar=sidecar)
        )
    if not runs:
        raise IngestError(f"{path}: W&B CSV export holds no values (every cell is empty)")
    return runs
