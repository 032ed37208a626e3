"""TensorBoard event files: legacy ``simple_value`` and tensor-form scalars, every point.

A source is one event file, or a directory that directly holds event files: they form one
run (named after the directory), read in order of their first wall time, then name. A
directory's subdirectories that hold event files are runs of their own (fairseq writes
``train/``, ``train_inner/``, ``valid/``), named by their path below the source.

Each file is read once into memory and framed, CRC-checked and decoded in one compiled
pass (:mod:`~proxydiag.ingest.tensorboard._scalars`); damage (a CRC mismatch, garbage, a truncated
tail) is an :class:`~proxydiag.errors.IngestWarning` naming ``file@offset`` and a run event,
and the intact records are kept. ``float32`` values (``simple_value``, ``DT_FLOAT``) are
widened exactly; ``DT_DOUBLE`` keeps float64.
"""

from __future__ import annotations

import os
import struct
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.events import Event
from proxydiag.frame import raw
from proxydiag.ingest import ReadContext, is_uri
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.run.keys import enum_keys
from proxydiag.run.sidecar import SIDECAR, sidecar_for

if TYPE_CHECKING:
    from proxydiag.ingest.tensorboard._scalars import Scalars

NAME = "tensorboard"
_MARK = "tfevents"


def is_event_file(path: Path) -> bool:
    """A file named like an event file, or whose first bytes frame as a TFRecord."""
    if _MARK in path.name:
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(12)
    except OSError:
        return False
    if len(head) < 12:
        return False
    import google_crc32c

    crc = google_crc32c.value(head[:8])
    masked = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    return bool(struct.unpack("<I", head[8:])[0] == masked)


def _event_files(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if _MARK in p.name and p.is_file())
    except OSError:
        return []


def can_read(source: str | Path) -> bool:
    """An event file, or a directory that directly contains event files."""
    if is_uri(source):
        return False
    path = Path(source)
    if path.is_dir():
        return bool(_event_files(path))
    return path.is_file() and is_event_file(path)


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    """The run of ``source`` (plus one per subdirectory holding event files)."""
    path = Path(source)
    if path.is_file():
        run = _read_files([path], name=run_name(path.resolve().parent), source=path, ctx=ctx)
        return [run] if run is not None else []
    runs: list[Run] = []
    for directory, _subdirs, _files in sorted(os.walk(path)):
        files = _event_files(Path(directory))
        if not files:
            continue
        rel = Path(directory).relative_to(path)
        root = run_name(path.resolve())
        name = root if rel == Path(".") else f"{root}/{rel.as_posix()}"
        run = _read_files(files, name=name, source=Path(directory), ctx=ctx)
        if run is not None:
            runs.append(run)
    if not runs:
        raise IngestError(
            f"{path}: no scalar points in its event files (empty, damaged, or only images/"
            "histograms/text); check that the run logged scalars"
        )
    return runs


def _read_files(files: list[Path], *, name: str, source: Path, ctx: ReadContext) -> Run | None:
    from proxydiag.ingest.tensorboard._scalars import read_file  # compiled code: import when needed

    parts = []
    events: list[Event] = []
    for file in files:
        scalars = read_file(file)
        issues = scalars.issues
        if scalars.size == 0 and not issues:
            issues = [
                (
                    "empty",
                    f"{file}: no scalar points in this event file "
                    "(empty, or only images/histograms/text)",
                )
            ]
        for kind, message in issues:
            warnings.warn(IngestWarning(message), stacklevel=3)
            events.append(Event(kind, None, None, None, "warning", 1.0, message))
        if scalars.size:
            parts.append((scalars.first_wall_time, str(file), scalars))
    if not parts:
        return None
    parts.sort(key=lambda p: (p[0], p[1]))
    return build_run(
        _raw([p for *_, p in parts]),
        name=name,
        source=source,
        fmt=NAME,
        aliases=ctx.aliases,
        attrs={"event_files": [Path(name_).name for _, name_, _ in parts]},
        events=events,
        sidecar=_sidecar(source),
    )


#: logdir names that say nothing about the run (``SummaryWriter``'s ``runs``, HF's default)
GENERIC_DIRS = frozenset(
    {"tb", "runs", "logs", "log", "tensorboard", "tb_logs", "tensorboard_logs", "events"}
)


def run_name(directory: Path) -> str:
    """A logdir's run name: its own, or its parent's when its own is generic (``tb``,
    ``runs``, ``logs``, ``tensorboard``...), going up until a name says something.

    >>> (
    ...     run_name(Path("/exp/grpo-lr3e-3/runs")),
    ...     run_name(Path("/exp/a/logs/tb")),
    ...     run_name(Path("/x/y")),
    ... )
    ('grpo-lr3e-3', 'a', 'y')
    """
    for d in (directory, *directory.parents):
        if d.name and d.name.lower() not in GENERIC_DIRS:
            return d.name
    return directory.name


def _sidecar(source: Path) -> Path:
    """The sidecar of a logdir: its own, else that of the directory it takes its name from."""
    own = sidecar_for(source)
    directory = source if source.is_dir() else source.parent
    if own.exists() or directory.name.lower() not in GENERIC_DIRS:
        return own
    named = next((d for d in directory.parents if d.name.lower() not in GENERIC_DIRS), None)
    return named / SIDECAR if named is not None and (named / SIDECAR).exists() else own


def _raw(parts: list[Scalars]) -> pl.DataFrame:
    """The raw frame of the files' points, in this order; the keys are an ``Enum`` over the
    files' tags (one file: its arrays, uncopied)."""
    index: dict[str, int] = {}
    ids = []
    for part in parts:
        ids_of = np.array([index.setdefault(n, len(index)) for n in part.tag_names], dtype=np.int32)
        same = np.array_equal(ids_of, np.arange(ids_of.size))  # no tag seen before, none repeated
        ids.append(part.tag_ids if same else ids_of[part.tag_ids])
    if len(parts) == 1:
        return raw(
            parts[0].steps, enum_keys(ids[0], list(index)), parts[0].values, parts[0].wall_times
        )
    return raw(
        np.concatenate([p.steps for p in parts]),
        enum_keys(np.concatenate(ids), list(index)),
        np.concatenate([p.values for p in parts]),
        np.concatenate([p.wall_times for p in parts]),
    )
