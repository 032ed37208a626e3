"""DeepSpeed ``csv_monitor`` output: a directory of ``<tag>.csv`` files, one tag each, is one run.

DeepSpeed (``deepspeed/monitor/csv_monitor.py``) names each file
``log_name.replace('/', '_').replace(' ', '_') + '.csv'`` and writes the header
``step,<last path component of the tag>``; the step is ``global_samples`` for the engine's
``Train/Samples/*`` tags, so such runs get ``attrs["step_kind"] = "samples"``.
"""

from __future__ import annotations

import csv as _csv
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from proxydiag.ingest import IGNORED_NAMES, ReadContext
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.run.sidecar import sidecar_for

if TYPE_CHECKING:
    from proxydiag.ingest.tabular.tables import Notes

#: reads one CSV file into a raw frame and its notes (``csv.read_table``)
TableReader = Callable[[Path], "tuple[pl.DataFrame, Notes]"]

FORMAT = "deepspeed_csv_monitor"
#: DeepSpeed's monitor tag prefixes as they appear in file names
_PREFIXES = {"Train_Samples_": "Train/Samples/", "Train_Eigenvalues_": "Train/Eigenvalues/"}


def monitor_tag(stem: str, column: str) -> str | None:
    """The monitor tag a file stands for, or None if ``stem``/``column`` are not DeepSpeed's.

    >>> monitor_tag("Train_Samples_train_loss", "train_loss")
    'Train/Samples/train_loss'
    >>> monitor_tag("loss", "loss")
    'loss'
    >>> monitor_tag("metrics", "loss") is None
    True
    """
    if stem == column:
        return column
    if not stem.endswith("_" + column):
        return None
    prefix = stem[: -len(column)]
    return _PREFIXES.get(prefix, prefix.replace("_", "/")) + column


def _files(path: Path) -> list[Path] | None:
    entries = [
        p
        for p in sorted(path.iterdir())
        if not p.name.startswith(".")
        and p.name not in IGNORED_NAMES
        and not p.name.endswith(".proxydiag.json")
    ]
    if not entries or not all(p.is_file() and p.suffix.lower() == ".csv" for p in entries):
        return None
    return entries


def _column(path: Path) -> str | None:
    """The metric column of a ``step,<name>`` header, else None."""
    try:
        with path.open("rb") as fh:
            first = fh.readline(4096).removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        cells = next(_csv.reader([first.rstrip("\r\n")]), [])
    except _csv.Error:
        return None
    if len(cells) != 2 or cells[0].strip().lower() != "step":
        return None
    return cells[1]


def is_monitor_dir(path: Path) -> bool:
    """All files are ``<tag>.csv`` with DeepSpeed's header, and there are two or more of them
    or one with a ``Train_`` prefix (one ``loss.csv`` alone is an ordinary CSV run)."""
    try:
        files = _files(path)
    except OSError:
        return False
    if files is None:
        return False
    for file in files:
        column = _column(file)
        if column is None or monitor_tag(file.stem, column) is None:
            return False
    return len(files) >= 2 or files[0].stem.startswith("Train_")


def read(path: Path, ctx: ReadContext, read_table: TableReader) -> Run:
    """The monitor directory ``path`` as one run; each file is read by ``read_table`` (the CSV
    reader's, which calls this: it hands its table reader in, so neither imports the other)."""
    frames = []
    attrs: dict[str, object] = {}
    for file in _files(path) or []:
        raw, notes = read_table(file)
        tag = monitor_tag(file.stem, _column(file) or file.stem) or file.stem
        frames.append(raw.with_columns(pl.lit(tag).alias("key")))
        attrs.update(notes.attrs())
    raw = pl.concat(frames) if frames else pl.DataFrame()
    if frames and raw.select(pl.col("key").str.starts_with("Train/Samples/").any()).item():
        attrs["step_kind"] = "samples"
    return build_run(
        raw,
        name=path.name,
        source=path,
        fmt=FORMAT,
        aliases=ctx.aliases,
        attrs=attrs,
        sidecar=sidecar_for(path),
    )
