"""Run the console dialects over a file's blocks, two blocks at a time.

polars releases the GIL, so while one thread extracts block *k* another extracts block
*k+1* and the main thread reads and splits block *k+2*: both cores work, and at most
``workers + 1`` blocks are in memory. Results are collected in file order. Dialects whose
state runs from block to block (``SEQUENTIAL = True``: the HF Trainer's running index of
log lines) run in the main thread, in order; a fallback dialect (``FALLBACK = True``: the
generic metric-line grammar) runs last on each block and reads only the lines no other
dialect read.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from proxydiag.ingest.console._lines import iter_lines
from proxydiag.ingest.console._records import Chunk, Extract, empty_records
from proxydiag.ingest.console._steps import anchors

if TYPE_CHECKING:
    from proxydiag.ingest.console.dialects import Dialect

#: threads extracting blocks (the machines this runs on have 2+ cores)
WORKERS = 2
#: smallest block when a file is split so that every worker has one
MIN_CHUNK_BYTES = 4 * 1024 * 1024


@dataclass
class Collected:
    records: list[pl.DataFrame] = field(default_factory=list)
    overflows: list[pl.DataFrame] = field(default_factory=list)
    anchors: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    #: each dialect's lines without a step of their own (``attach`` ≠ 0), kept apart: they
    #: take their steps from their own dialect's progress lines (:func:`~._steps.attach`)
    stepless: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    found: dict[str, None] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    n_lines: int = 0


def stream(
    path: Path,
    mods: list[Dialect],
    *,
    chunk_bytes: int,
    workers: int = WORKERS,
    state: dict[str, Any] | None = None,
    first_line: int = 1,
) -> Collected:
    """Extract every dialect's records from ``path``, block by block, in file order.

    ``state`` is the parse state the dialects carry from block to block (the HF Trainer's
    running index of log lines, an open table's header): given, it is taken up and updated
    in place, so a live tail's chunks read as the one file they are part of; ``first_line``
    numbers the chunk's first line."""
    out = Collected() if state is None else Collected(state=state)
    for mod in mods:
        if hasattr(mod, "prepare"):
            mod.prepare(path, out.state)
    parallel = [m for m in mods if not getattr(m, "SEQUENTIAL", False)]
    serial = [m for m in mods if getattr(m, "SEQUENTIAL", False)]
    size = _block_size(path, chunk_bytes=chunk_bytes, workers=workers)
    pending: deque[tuple[Chunk, Future[list[tuple[str, Extract]]]]] = deque()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for lines in iter_lines(path, chunk_bytes=size, first_line=first_line):
            chunk = Chunk(path, lines, out.state)
            pending.append((chunk, pool.submit(_extract, parallel, chunk)))
            while len(pending) > workers:
                _collect(out, *pending.popleft(), serial)
        while pending:
            _collect(out, *pending.popleft(), serial)
    return out


def _block_size(path: Path, *, chunk_bytes: int, workers: int) -> int:
    """``chunk_bytes``, or less for a file that would otherwise be one block."""
    try:
        size = path.stat().st_size
    except OSError:
        return chunk_bytes
    return min(chunk_bytes, max(MIN_CHUNK_BYTES, size // max(1, 2 * workers)))


def _extract(mods: list[Dialect], chunk: Chunk) -> list[tuple[str, Extract]]:
    return [(mod.NAME, mod.extract(chunk)) for mod in mods]


def _collect(
    out: Collected,
    chunk: Chunk,
    future: Future[list[tuple[str, Extract]]],
    serial: list[Dialect],
) -> None:
    results = future.result() + _extract([m for m in serial if not _fallback(m)], chunk)
    for mod in serial:
        if _fallback(mod):  # it reads only the lines no other dialect read
            rest = Chunk(chunk.path, _unclaimed(chunk.lines, results), chunk.state)
            results.append((mod.NAME, mod.extract(rest)))
    out.n_lines += chunk.lines.height
    parts = []
    for name, got in results:
        if got.overflows is not None and not got.overflows.is_empty():
            out.overflows.append(got.overflows)
            out.found[name] = None
        if not got.records.is_empty():
            out.found[name] = None
            records = got.records
            if (records["attach"] != 0).any():
                out.stepless.setdefault(name, []).append(records.filter(pl.col("attach") != 0))
                records = records.filter(pl.col("attach") == 0)
            parts.append(records)
            own = got.anchors if got.anchors is not None else anchors(records)
            out.anchors.setdefault(name, []).append(own)
        elif got.anchors is not None and got.anchors.height:
            # progress lines without points of their own (a step header): they still give
            # their steps to the lines that report on them
            out.anchors.setdefault(name, []).append(got.anchors)
    out.records.append(_merge(parts))


def _fallback(mod: Dialect) -> bool:
    return bool(getattr(mod, "FALLBACK", False))


def _unclaimed(lines: pl.DataFrame, results: list[tuple[str, Extract]]) -> pl.DataFrame:
    """``lines`` without those another dialect's records or overflow rows come from."""
    taken = [
        frame.select("line")
        for _, got in results
        for frame in (got.records, got.overflows)
        if frame is not None and frame.height
    ]
    if not taken:
        return lines
    return lines.join(pl.concat(taken).unique(), on="line", how="anti")


def _merge(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """One frame; rows of a key two dialects share (``lr``) interleaved in file order."""
    if not parts:
        return empty_records()
    if len(parts) == 1:
        return parts[0]
    keys = [set(p["key"].unique().to_list()) for p in parts]
    shared = any(a & b for i, a in enumerate(keys) for b in keys[i + 1 :])
    merged = pl.concat(parts)
    return merged.sort("line", maintain_order=True) if shared else merged
