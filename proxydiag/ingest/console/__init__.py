"""Console logs: one reader for the text that training frameworks print.

``can_read`` sniffs the first MB for any dialect's lines. ``read`` streams the file in
blocks (:mod:`console_lines`), lets every dialect extract its records from each block with
polars string expressions (:data:`DIALECTS`, one module each; two blocks at a time,
:mod:`console_stream`), then, over the records only:
gives step-less lines their steps (:mod:`console_steps`), turns overflow lines into
``skipped``/``loss_scale`` points (:mod:`console_overflow`), and hands the raw frame to
:func:`~proxydiag.run.build.build_run` (restarts, aliases, counters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from proxydiag.errors import NoPointsError
from proxydiag.events import Event
from proxydiag.ingest import ReadContext
from proxydiag.ingest.console._crash import crash_events
from proxydiag.ingest.console._lines import CHUNK_BYTES, head_text
from proxydiag.ingest.console._overflow import resolve
from proxydiag.ingest.console._records import empty_overflows, empty_records
from proxydiag.ingest.console._steps import attach, split_engines
from proxydiag.ingest.console._stream import WORKERS, stream
from proxydiag.ingest.console.dialects import DIALECTS, Dialect
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.run.sidecar import sidecar_for

NAME = "console"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class ConsoleParse:
    """A parsed console log before :func:`build_run`: the raw frame and what was found."""

    raw: pl.DataFrame  # step, key, value, wall_time (file order within each key)
    overflows: pl.DataFrame  # one row per counted overflow: line, step, family, attempted, scale
    dialects: list[str]
    events: list[Event] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)

    def take_raw(self) -> pl.DataFrame:
        """The raw frame, handed over: passed straight to :func:`build_run`, it is its only
        reference, so columns build_run is done with are freed before the canonical frame is
        built (the peak of a long log)."""
        raw, self.raw = self.raw, self.raw.clear()
        return raw


def dialects() -> list[Dialect]:
    """The dialects, in :data:`~proxydiag.ingest.console.dialects.DIALECTS` order."""
    return list(DIALECTS)


def can_read(source: str | Path) -> bool:
    """True for a text file whose first MB holds a line of a known dialect."""
    path = Path(source)
    if not path.is_file():
        return False
    # colour codes split words from numbers (``\x1b[32mloss: 2.5``): sniffed without them
    head = _ANSI.sub("", head_text(path))
    return bool(head) and any(d.SNIFF.search(head) for d in dialects())


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    path = Path(source)
    chunk_bytes = int(ctx.options.get("chunk_bytes", CHUNK_BYTES))
    workers = int(ctx.options.get("workers", WORKERS))
    parsed = parse(
        path,
        chunk_bytes=chunk_bytes,
        workers=workers,
        ordered=not ctx.options.get("continuation", False),
        state=ctx.options.get("console_state"),
        first_line=int(ctx.options.get("first_line", 1)),
    )
    if parsed.raw.is_empty():
        raise NoPointsError(
            f"{path}: no metric lines found in this console log (dialects tried: "
            f"{', '.join(d.NAME for d in dialects())}); check the file or convert it to CSV"
        )
    run = build_run(
        parsed.take_raw(),
        name=path.stem,
        source=path,
        fmt=NAME,
        aliases=ctx.aliases,
        attrs=parsed.attrs,
        events=parsed.events,
        sidecar=sidecar_for(path),
    )
    return [run]


def parse(
    path: Path,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    workers: int = WORKERS,
    ordered: bool = True,
    state: dict[str, Any] | None = None,
    first_line: int = 1,
) -> ConsoleParse:
    r"""Stream ``path`` through every dialect and resolve steps, engines and overflows.

    Parameters
    ----------
    path
        A text log (any mix of the dialects in :data:`DIALECTS`).
    chunk_bytes
        Bytes read per block; memory stays bounded by a few blocks plus the records.
    workers
        Threads extracting blocks at once (1: one block at a time).
    ordered
        In a file with no step anywhere, lines of metric pairs take their order as steps;
        False for a chunk that continues a file (a live tail's): they are dropped.
    state, first_line
        A chunk that continues a file: the dialects' state the earlier chunks left (updated
        in place) and the number of the chunk's first line in the file.

    Returns
    -------
    ConsoleParse
        The raw frame (what :func:`build_run` takes), one row per counted overflow, the
        events and attrs found (overflow family and step uncertainty, engines, loss base).

    Examples
    --------
    >>> import tempfile, os
    >>> text = ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, "
    ...         "reducing to 32768\n[Rank 0] step=10, skipped=1, lr=[1e-05]\n")
    >>> with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
    ...     _ = fh.write(text)
    >>> parsed = parse(Path(fh.name))
    >>> parsed.raw.filter(pl.col("key") == "ds_overflow").rows()
    [(10, 'ds_overflow', 1.0, None)]
    >>> parsed.overflows.select("step", "attempted", "scale").rows()
    [(10, 65536.0, 32768.0)]
    >>> os.remove(fh.name)
    """
    got = stream(
        path,
        dialects(),
        chunk_bytes=chunk_bytes,
        workers=workers,
        state=state,
        first_line=first_line,
    )
    recs = _no_counters(pl.concat([empty_records(), *got.records]))
    ovf = pl.concat([empty_overflows(), *got.overflows])
    anchor_lines = _dominant(got.anchors)
    stepless = [pl.concat(parts) for parts in got.stepless.values()]
    loose = pl.concat([empty_records(), *stepless])
    every = _every(got.anchors)
    if state is not None:  # a live tail's chunk: the step in force when it begins
        prior = got.state.get("last_anchor")
        anchor_lines, every = _carried(anchor_lines, prior), _carried(every, prior)
        known = every.filter(pl.col("step").is_not_null())
        if known.height:
            got.state["last_anchor"] = [int(known["line"][-1]), int(known["step"][-1])]
    # lines read in the record order only (``attach = 2``: the grammar's step-less lines of
    # pairs) count only in a file where nothing has a step
    by_order = loose["attach"] == 2
    if by_order.any():
        keep = ordered and not every.height
        placed = (
            _on_counter_axis(loose.filter(by_order), every) if ordered and every.height else None
        )
        if placed is not None:
            # metric lines counted by their order, progress lines by a counter: one axis
            loose = loose.filter(~by_order)
            # in file order among the other records (a key both print must not go back)
            recs = pl.concat([recs, placed.select(recs.columns)]).sort("line", maintain_order=True)
            anchor_lines = (
                pl.concat([anchor_lines, placed.select("line", "step").unique("line")])
                .unique("line", keep="first")
                .sort("line")
            )
            got.state.setdefault("attrs", {})["step_source"] = [
                "the order of the metric lines, put on the step counter of the other lines"
            ]
        elif keep:
            loose = loose.with_columns(pl.lit(-1, dtype=pl.Int8).alias("attach"))
            got.state.setdefault("attrs", {})["step_source"] = ["the order of the metric lines"]
        else:
            loose = loose.filter(~by_order)
    loose = attach(loose, every)
    loose = loose.sort("line", maintain_order=True)
    return _assemble(recs, loose, ovf, anchor_lines, list(got.found), got.state, got.n_lines)


def _carried(anchor_lines: pl.DataFrame, prior: list[int] | None) -> pl.DataFrame:
    """``anchor_lines`` after ``prior``, the last progress line of the chunks before (a line
    before the chunk's first: an overflow or a warning at its start reports on that step, not
    on a record order of its own)."""
    frame = anchor_lines.select(pl.col("line").cast(pl.Int64), pl.col("step").cast(pl.Int64))
    if prior is not None:
        before = pl.DataFrame(
            {"line": [int(prior[0])], "step": [int(prior[1])]},
            schema={"line": pl.Int64, "step": pl.Int64},
        )
        frame = pl.concat([before, frame.filter(pl.col("line") > int(prior[0]))])
    return frame


#: metric lines counted by their order are put on a counter's axis only when they are the
#: file's main record: at least this many, and at least twice as many as its progress lines
LEAST_ORDERED = 3


def _on_counter_axis(rows: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame | None:
    """Rows of metric lines that count steps by their order (``attach = 2``) with steps on the
    axis of the file's step counters, or None when the two do not make one axis.

    The k-th such line (in file order) is step ``a*k + b``: ``a`` and ``b`` from the progress
    lines, each of which is taken to report the step of the metric line printed just before it
    (two at least, after different numbers of metric lines: one is no axis); every progress
    line must then lie within ``max(1, a/2)`` steps of the line. A few step-less lines beside
    many counted ones (a config dump, a banner) are no axis: they are dropped, as before; so
    is a line whose step would fall before the counter's start or outside the steps of the
    progress lines around it (by more than ``max(1, a/2)``).
    """
    lines = rows.select("line").unique().sort("line")["line"]
    anchors = every.filter(pl.col("step").is_not_null())
    if lines.len() < max(LEAST_ORDERED, 2 * anchors.height):
        return None
    before = np.searchsorted(lines.to_numpy(), anchors["line"].to_numpy())  # o(L)
    steps = anchors["step"].to_numpy().astype(float)
    seen = before >= 1
    if not seen.any():
        return None
    k, n = before[seen].astype(float), steps[seen]
    if np.unique(k).size < 2:  # one progress line is no axis
        return None
    a, b = np.polyfit(k, n, 1)
    if not np.isfinite(a) or a <= 0:
        return None
    if np.max(np.abs(a * k + b - n)) > max(1.0, a / 2):
        return None
    ordinal = pl.DataFrame({"line": lines, "_k": np.arange(1, lines.len() + 1, dtype=float)})
    placed = rows.join(ordinal, on="line", how="left").with_columns(
        (pl.col("_k") * a + b).round(0).cast(pl.Int64).alias("step"),
        pl.lit(0, dtype=pl.Int8).alias("attach"),
    )
    # a line is on the axis only between the steps of the progress lines around it: a clump
    # of step-less lines before the first (an environment dump's ``PATH_modshare=:1:/usr:1``)
    # would otherwise take steps before the run's start
    slack = max(1.0, a / 2)
    near = anchors.select("line", pl.col("step").alias("_s")).sort("line")
    placed = (
        placed.sort("line")
        .join_asof(near.rename({"_s": "_before"}), on="line", strategy="backward")
        .join_asof(near.rename({"_s": "_after"}), on="line", strategy="forward")
        .filter(
            (pl.col("step") >= min(0, int(steps.min())))  # no step before the counter's start
            & (pl.col("_before").is_null() | (pl.col("step") >= pl.col("_before") - slack))
            & (pl.col("_after").is_null() | (pl.col("step") <= pl.col("_after") + slack))
        )
    )
    return placed.drop("_k", "_before", "_after")


def _no_counters(recs: pl.DataFrame) -> pl.DataFrame:
    """``recs`` without the step counters a dict or ``key:value`` line carries under a
    namespace (``training/global_step``, ``train/step``, ``trainer/epoch``, ``Train
    time/batch``): keys whose last part is a counter's name and whose values are all whole
    numbers count steps; they are not metrics (``timing/step: 155.39`` is one)."""
    from proxydiag.ingest.console.dialects.grammar import COUNTERS

    if recs.is_empty():
        return recs
    # decided once a key (a log of a million lines has a few dozen)
    keys = recs.get_column("key").unique().cast(pl.Utf8)
    last = keys.str.to_lowercase().str.extract(r"/([^/]+)$", 1)
    counting = keys.filter(last.is_in([*COUNTERS, "epoch", "epochs"]).fill_null(False))
    if counting.is_empty():
        return recs
    named = pl.col("key").cast(pl.Utf8).is_in(counting.to_list())
    whole = (
        recs.filter(named)
        .group_by("key")
        .agg((pl.col("value") == pl.col("value").round(0)).all().alias("whole"))
        .filter(pl.col("whole"))
        .get_column("key")
        .cast(pl.Utf8)
    )
    if whole.is_empty():
        return recs
    return recs.filter(~pl.col("key").cast(pl.Utf8).is_in(whole.to_list()))


def _dominant(parts: dict[str, list[pl.DataFrame]]) -> pl.DataFrame:
    """The progress lines of the dialect with the most of them.

    Overflow lines take their steps from these only: DeepSpeed-Chat PPO prints its own
    0-based step lines and DeepSpeed's 1-based ``step=`` lines, and mixing the two axes
    would send a step backwards.
    """
    frames = {name: pl.concat(fs) for name, fs in parts.items() if fs}
    if not frames:
        return pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64})
    return max(frames.values(), key=lambda f: f.height)


def _every(parts: dict[str, list[pl.DataFrame]]) -> pl.DataFrame:
    """The progress lines of every dialect, by line: a line without a step reports on the
    progress line printed just before it (or announces the next), whichever program printed
    that one. DeepSpeed-Chat's reward line follows its PPO step line; DeepSpeed's ``step=``
    line of the same step comes after it, so taking that dialect's lines when it prints more
    put every reward one step early."""
    frames = [f for fs in parts.values() for f in fs]
    if not frames:
        return pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64})
    return pl.concat(frames).unique("line", keep="first").sort("line")


def _assemble(
    recs: pl.DataFrame,
    loose: pl.DataFrame,
    ovf: pl.DataFrame,
    anchor_lines: pl.DataFrame,
    found: list[str],
    state: dict[str, Any],
    n_lines: int,
) -> ConsoleParse:
    own = recs
    engines = 1
    counters = own.clear()
    if "deepspeed" in found:
        own, engines = split_engines(own)
        counters = own.filter(pl.col("key").cat.starts_with("ds_skipped"))
    resolved = resolve(ovf, anchor_lines, counters.with_columns(pl.col("key").cast(pl.Utf8)))
    # the small parts as one chunk each and empty ones left out: the columns of ``raw`` stay
    # chunked alike, so selecting from it copies nothing (misaligned chunks force a rechunk)
    small = [loose, resolved.records]
    raw = pl.concat([own, *(part.rechunk() for part in small if part.height)])
    attrs: dict[str, Any] = {"console_dialects": found, "console_lines": n_lines}
    attrs.update({k: v for k, v in resolved.attrs.items() if v is not None})
    attrs.update(state.get("attrs", {}))
    if engines > 1:
        attrs["engines"] = engines
        attrs["engines_note"] = (
            "step= lines of several engines without names: engine 0 (first to log each step; "
            "the actor in DeepSpeed-Chat PPO) keeps plain keys, engine k gets '@engine<k>'"
        )
    events = list(resolved.events)
    events += crash_events(own, resolved.overflows, anchor_lines, state.get("tracebacks", []))
    if attrs.get("step_source"):
        events.append(step_source_event(attrs["step_source"]))
    return ConsoleParse(
        raw.select("step", "key", "value", "wall_time"),
        resolved.overflows,
        found,
        events,
        attrs,
    )


def step_source_event(sources: list[str]) -> Event:
    """An info event saying where lines without a step key took their steps from.

    >>> step_source_event(["the tqdm counter on the same line"]).evidence
    'steps of lines without a step key taken from: the tqdm counter on the same line'
    """
    return Event(
        "step_source",
        None,
        None,
        None,
        "info",
        1.0,
        "steps of lines without a step key taken from: " + "; ".join(sources),
    )
