"""fp16 dynamic loss scaling: persistent skipping, scale collapse, scale at its minimum.

Benign patterns are not failures (docs/failures.md#benign-look-alikes): the leading
burst of overflows while the scaler calibrates (65536 -> ~1024 in the first steps), and the
periodic growth probes — every ``scale_window`` clean steps the scale doubles, overflows once or
twice and halves back (139 skipped of 7,360 steps in a healthy SFT run). A failure is skipping
that persists (a high skipped fraction over a window), a scale that ends many halvings below its
own level and never recovers, or a scale at its minimum ("Minimum loss scale reached").
"""

from __future__ import annotations

import math

import numpy as np

from proxydiag.diagnose._stats import cluster_start, runs_of, window_sum
from proxydiag.diagnose.config import DiagnoseConfig, ScalerConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.metrics import SKIP_COUNTERS
from proxydiag.run import Run

#: logged points a start-up burst needs before its own span, not a window, judges it
_MIN_POINTS = 8


NAME = "scaler"
#: its events decide labels (gradient_overflow)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads (a learning rate for the warm-up)."""
    return ("loss_scale", *SKIP_COUNTERS, "loss", "pg_loss", "perplexity", "lr")


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``calibration`` (info), ``skip_burst`` (critical: persistent skipping),
    ``scale_collapse`` and ``scale_min`` (critical).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> steps = np.arange(300)
    >>> skips = np.where((steps < 8) | (steps >= 200), 1.0, 0.0)
    >>> ev = detect(from_arrays({"skipped": (steps, skips)}), DiagnoseConfig())
    >>> [(e.kind, e.onset_step) for e in ev]
    [('calibration', 0), ('skip_burst', 200)]
    """
    rv = view(run)
    c = cfg.scaler
    counts = skip_counts(rv)
    events: list[Event] = []
    calib_end = None
    if counts is not None:
        calib_end = calibration_end(counts, c, open_end=may_calibrate(rv), floor=floor_step(rv, c))
        if calib_end is not None:
            n = int(counts.values[counts.steps <= calib_end].sum())
            events.append(
                Event(
                    "calibration",
                    counts.name,
                    int(counts.steps[0]),
                    calib_end,
                    "info",
                    0.9,
                    f"{counts.name}: {n} overflow(s) up to step {calib_end} while the scaler "
                    "calibrates (benign)",
                )
            )
        events.extend(_persistent(counts, c, calib_end=calib_end))
        events.extend(_at_floor(counts, c, floor_step(rv, c)))
    scale = rv.get("loss_scale")
    if scale is not None:
        events.extend(_scale_events(scale, c, calib_end=calib_end, interval=rv.interval))
    if any(e.kind == "scale_min" for e in events):
        # the descent to the floor is said already, and how far it fell
        events = [e for e in events if e.kind != "scale_floor"]
    return events


def may_calibrate(rv: RunView) -> bool:
    """False when the run says its overflows are no calibration: a logged loss scale that
    never fell (a static scale) or a non-finite loss, perplexity or policy loss (the forward
    pass overflowed, which no scale fixes).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> may_calibrate(from_arrays({"loss_scale": ([1, 2, 3], [2.0**24] * 3)}))
    False
    """
    scale = rv.get("loss_scale")
    if scale is not None:
        finite = scale.values[scale.finite]
        if finite.size >= 2 and not (np.diff(finite) < 0).any():
            return False
    # a loss (or exp(loss)) that is not finite: the forward pass overflowed
    return all(
        (loss := rv.get(m)) is None or bool(loss.finite.all())
        for m in ("loss", "perplexity", "pg_loss")
    )


def skip_counts(rv: RunView) -> Series | None:
    """Skipped steps per logged step: the counter if logged, else inferred from scale halvings."""
    for name in SKIP_COUNTERS:
        s = rv.get(name)
        if s is not None:
            vals = np.where(np.isfinite(s.values), np.maximum(s.values, 0.0), 0.0)
            return _from_run_start(Series(name, s.steps, vals), rv.first_step)
    scale = rv.get("loss_scale")
    if scale is None or len(scale) < 2:
        return None
    ok = np.isfinite(scale.values) & (scale.values > 0)
    if ok.sum() < 2:  # a scale logged only as NaN/inf shows no halvings to count
        return None
    steps, vals = scale.steps[ok], np.log2(scale.values[ok])
    drops = np.maximum(-np.diff(vals, prepend=vals[:1]), 0.0)
    return Series("loss_scale", steps, np.round(drops))


def _from_run_start(counts: Series, first_step: int | None) -> Series:
    """Counts that start where the run starts: a counter logged only at overflow steps (the
    console's overflow lines) gets a zero at the run's first step, so that a burst in the
    middle of a log is not read as the scaler's start-up calibration.

    >>> _from_run_start(Series("skipped", np.array([377, 378]), np.ones(2)), 370).steps.tolist()
    [370, 377, 378]
    """
    if first_step is None or len(counts) == 0 or counts.steps[0] <= first_step:
        return counts
    return Series(
        counts.name,
        np.r_[first_step, counts.steps].astype(counts.steps.dtype),
        np.r_[0.0, counts.values],
    )


def floor_step(rv: RunView, c: ScalerConfig) -> int | None:
    """The first step at which the loss scale is at its floor (``min_scale``), or None: a
    scaler there has nothing left to calibrate, so overflows from then on are no calibration
    (DeepSpeed's ``Attempted loss scale: 1, reducing to 1``)."""
    scale = rv.get("loss_scale")
    if scale is None:
        return None
    low = scale.finite & (scale.values <= c.min_scale)
    return int(scale.steps[low][0]) if low.any() else None


def calibration_end(
    counts: Series, c: ScalerConfig, *, open_end: bool = False, floor: int | None = None
) -> int | None:
    """Last step of the loss scaler's calibration, or None when the run has none.

    A dynamic scaler starts high (2^16 in DeepSpeed, 2^32 in Megatron) and halves on overflow
    steps until it settles (65536 -> 1024 in the DeepSpeed-Chat logs): those first overflows
    are calibration, not a fault. ``counts`` are overflow (skipped) steps per logged step. The
    unbroken descent the run starts with is calibration when the run settles after it
    (:func:`descent_end`); so is the burst the run starts with (hits closer together than
    ``calibration_gap_steps``) is the calibration when it ends within ``calibration_steps`` of the
    first step. A burst that lasts longer, or that the data ends in, is calibration up to there only
    if the overflows never persisted (more than ``max_skip_fraction`` of a ``window_steps`` window,
    the detectors' own rule; a stretch shorter than a window cannot show it): a run that
    overflows continuously from its start has a fault there. With ``open_end`` (nothing says
    otherwise: see :func:`may_calibrate`), a burst the data ends in is the calibration so far
    while it is no longer than ``calibration_steps`` and :data:`MAX_DESCENT_STEPS` (the prefix
    of a live run, or a log that holds only the start-up burst).

    >>> steps = np.arange(300)
    >>> def end(hits): return calibration_end(Series("skipped", steps, hits), ScalerConfig())
    >>> end(np.where((steps < 8) | (steps >= 200), 1.0, 0.0))  # calibration, then a fault
    7
    >>> end(np.where(steps >= 200, 1.0, 0.0)), end(np.ones(300))  # none; a fault from the start
    (None, None)
    >>> calibration_end(Series("skipped", steps[:20], np.ones(20)), ScalerConfig()) is None
    True
    """
    end = _calibration_end(counts, c, open_end=open_end)
    if end is None or floor is None or end < floor:
        return end
    # a calibration ends before the scale reaches its floor (see floor_step)
    hits = counts.steps[(counts.values > 0) & (counts.steps < floor)]
    return int(hits.max()) if hits.size else None


def _calibration_end(counts: Series, c: ScalerConfig, *, open_end: bool) -> int | None:
    hits = np.flatnonzero(counts.values > 0)
    if hits.size and int(counts.steps[hits[0]]) > c.calibration_steps:
        # the scaler calibrates when training starts (its state is checkpointed and resumed):
        # a burst first seen at step 377 of an excerpt is not a start-up
        return None
    # the unbroken descent is calibration however the gap rule chains later skips to it
    ends = [
        e
        for e in (descent_end(counts, c), _chained_end(counts, c, open_end=open_end))
        if e is not None
    ]
    return max(ends) if ends else None


def _chained_end(counts: Series, c: ScalerConfig, *, open_end: bool = False) -> int | None:
    """The leading burst (overflows chained by gaps under ``calibration_gap_steps``) when it
    ends soon enough, or never persisted; with ``open_end``, a burst the data ends in is
    calibration so far while it is no longer than a calibration can be."""
    end = _leading_burst_end(counts, c)
    if end is None:
        return None
    first, last = int(counts.steps[0]), int(counts.steps[-1])
    if open_end and end == last and end - first <= min(c.calibration_steps, MAX_DESCENT_STEPS):
        return end
    clean = np.flatnonzero(counts.values <= 0)
    if (
        end == last
        and clean.size
        and clean[-1] > 0
        and len(counts) - 1 - clean[-1] <= c.benign_streak_points
    ):
        # the data ends inside the burst (a live run's prefix) in a streak a scaler shows
        # after calibrating: the burst up to its last clean step is judged as if the data
        # ended there, and the streak on its own (the detectors' terminal rule): calibration
        # 1-13 then skips at 16-17 is no fault at 17
        head = int(clean[-1]) + 1
        found = _chained_end(Series(counts.name, counts.steps[:head], counts.values[:head]), c)
        if found is not None:
            return found
    if end < last and end - first <= c.calibration_steps:
        return end
    # sparse overflows may chain into a long burst while the scale settles (the DeepSpeed-Chat
    # DPO log: 7 overflows in its first 209 steps); a dense one is still overflowing
    end = min(end, first + c.calibration_steps)
    window = skip_window(c, counts.interval)
    upto = counts.steps <= end
    # a run shorter than a window is judged on the steps it has, if it logged enough of them
    # to show anything persisting (a 4-step benchmark's one start-up point does not)
    enough = int(np.count_nonzero(upto)) >= _MIN_POINTS
    covered = min(window, float(end - first + counts.interval)) if enough else window
    rate = window_sum(counts.steps[upto], counts.values[upto], window_steps=window) / covered
    return None if (rate > c.max_skip_fraction).any() else end


#: longest unbroken descent read as calibration: from 2^32 (Megatron, torch's GradScaler via
#: accelerate when set so) to 1 is 32 halvings, two overflow steps each with DeepSpeed's and
#: Megatron's hysteresis of 2
MAX_DESCENT_STEPS = 64


def descent_end(counts: Series, c: ScalerConfig) -> int | None:
    """Last step of the unbroken run of overflow steps a run starts with, when learning goes
    on after it; else None.

    A dynamic scaler that starts high halves on every overflow (every second one with
    hysteresis 2) and never grows while it overflows: an unbroken leading run of overflow steps
    is its scale descending from its initial value, however long (up to
    :data:`MAX_DESCENT_STEPS`, and ``calibration_steps``). It is calibration when the window after
    it is not itself overflowing (more than ``max_skip_fraction``): a scale that never settles is a
    fault from the first step. Isolated skips after the descent are judged on their own.

    >>> steps = np.arange(1, 201)
    >>> hits = np.zeros(200); hits[:14] = 1; hits[[21, 59, 109]] = 1
    >>> descent_end(Series("skipped", steps, hits), ScalerConfig())
    14
    >>> descent_end(
    ...     Series("skipped", steps, np.where(steps % 7 == 0, 0.0, 1.0)), ScalerConfig()
    ... ) is None
    True
    """
    over = counts.values > 0
    if over.size == 0 or not over[0]:
        return None
    clean = np.flatnonzero(~over)
    if clean.size == 0:
        return None  # overflowing to the end: nothing after it learns
    end = int(counts.steps[clean[0] - 1])
    # a run not known to be fp16 gets the shorter ``unknown_calibration_steps`` (the caller's
    # ``calibration_steps``): a bf16 run has no calibration at all
    if end - int(counts.steps[0]) > min(
        MAX_DESCENT_STEPS, c.calibration_steps
    ) or not _settles_after(counts, c, end):
        return None
    return end


def _settles_after(counts: Series, c: ScalerConfig, end: int) -> bool:
    """True when the window after ``end`` skips no more than ``max_skip_fraction`` of its steps."""
    window = skip_window(c, counts.interval)
    after = (counts.steps > end) & (counts.steps <= end + window)
    if not after.any():
        return False
    covered = min(window, float(counts.steps[after][-1] - end))
    return float(counts.values[after].sum()) / max(covered, 1.0) <= c.max_skip_fraction


def skip_window(c: ScalerConfig, interval: float) -> float:
    """Steps of the window over which a skip (or non-finite) rate is taken: ``window_steps``,
    but at least four log intervals (a sparsely logged run shows a rate only over several)."""
    return max(float(c.window_steps), 4 * interval)


#: a burst is traced back through pauses up to the longest one its density would show, with
#: this chance of a longer one among its hits
_PAUSE_CHANCE = 0.05


def burst_gap(c: ScalerConfig, interval: float, *, rate: float = 1.0, hits: int = 0) -> float:
    """Largest gap between hits of one burst when its start is traced back from where it
    persists: ``calibration_gap_steps``, but at least four log intervals, and for a burst of
    ``hits`` on ``rate`` of its logged points, the longest pause such a burst shows: its
    ``hits`` gaps stay under g points with chance about 1 - hits * (1 - rate)^g. A burst of
    non-finite values on 35% of the steps paused 14 steps early on; a gap of 10 dated it
    where it resumed, 47 steps late.

    >>> burst_gap(ScalerConfig(), 1.0), round(burst_gap(ScalerConfig(), 1.0, rate=0.35, hits=100))
    (10.0, 18)
    """
    gap = max(float(c.calibration_gap_steps), 4 * interval)
    if not 0 < rate < 1 or hits < 1:
        return gap
    longest = math.log(_PAUSE_CHANCE / hits) / math.log1p(-rate)
    return max(gap, longest * interval)


def _leading_burst_end(counts: Series, c: ScalerConfig) -> int | None:
    """Last step of the burst of positive counts the run starts with (hits closer together than
    ``calibration_gap_steps`` belong to it), or None when the run does not start with one.

    >>> _leading_burst_end(Series("skipped", np.arange(50), np.r_[np.ones(5), np.zeros(45)]),
    ...                    ScalerConfig())
    4
    """
    hit = np.flatnonzero(counts.values > 0)
    if hit.size == 0:
        return None
    gap = max(c.calibration_gap_steps, 2 * counts.interval)
    if counts.steps[hit[0]] - int(counts.steps[0]) > gap:
        return None
    steps = counts.steps[hit]
    breaks = np.flatnonzero(np.diff(steps) > gap)
    return int(steps[breaks[0]]) if breaks.size else int(steps[-1])


def _persistent(counts: Series, c: ScalerConfig, *, calib_end: int | None) -> list[Event]:
    vals = counts.values.copy()
    if calib_end is not None:
        vals[counts.steps <= calib_end] = 0.0
    window = skip_window(c, counts.interval)
    covered = np.minimum(window, counts.steps - counts.steps[0] + counts.interval)
    rate = window_sum(counts.steps, vals, window_steps=window) / covered
    high = rate > c.max_skip_fraction
    if not high.any():
        return []
    starts, ends = runs_of(high)
    events = []
    gap = burst_gap(c, counts.interval)
    for a, b in zip(starts[:5], ends[:5], strict=False):
        start = cluster_start(counts.steps[vals > 0], counts.steps[a], gap_steps=gap)
        first = int(np.searchsorted(counts.steps, start))
        # a per-interval count c at step s that persists covers the last c steps of the interval
        span = min(vals[first], counts.interval)
        onset = int(counts.steps[first] - max(span, 1.0) + 1)
        total = int(vals[first:b].sum())
        end_step = int(counts.steps[b - 1])
        events.append(
            Event(
                "skip_burst",
                counts.name,
                onset,
                end_step,
                "critical",
                0.9,
                f"{counts.name}: {total} steps skipped between steps {onset} and {end_step}; "
                f"peak skipped fraction {rate[a:b].max():.0%} over {window:.0f} steps "
                f"(> {c.max_skip_fraction:.0%})",
            )
        )
    return events


def _at_floor(counts: Series, c: ScalerConfig, floor: int | None) -> list[Event]:
    """Overflows with the loss scale at its floor: the scaler can halve no more, so they are
    no calibration, whenever they come (evidence; the non-finite values decide)."""
    if floor is None:
        return []
    hits = counts.steps[(counts.values > 0) & (counts.steps >= floor)]
    if not hits.size:
        return []
    n = int(counts.values[(counts.values > 0) & (counts.steps >= floor)].sum())
    return [
        Event(
            "scale_floor",
            "loss_scale",
            int(hits[0]),
            int(hits[-1]),
            "warning",
            0.9,
            f"{counts.name}: {n} overflow(s) from step {int(hits[0])} with the loss scale at its "
            f"floor ({c.min_scale:g}): the scaler can halve no more, so they are no calibration",
        )
    ]


def _scale_events(
    scale: Series, c: ScalerConfig, *, calib_end: int | None, interval: float = 1.0
) -> list[Event]:
    """``scale_min`` / ``scale_collapse`` of the scale after calibration. ``interval`` is the
    run's log interval: a scale logged at its overflows takes the step of the next progress
    line, so one descent's drops lie one or two intervals apart (a DeepSpeed collapse: 10-20
    steps at an interval of 10); drops further apart are separate descents."""
    ok = np.isfinite(scale.values) & (scale.values > 0)
    steps, lg = scale.steps[ok], np.log2(np.where(ok, scale.values, 1.0)[ok])
    if steps.size < 2:  # a scale logged only as NaN/inf: nothing to date a collapse on
        return []
    after = steps > (calib_end if calib_end is not None else steps[0] - 1)
    if after.sum() < 2:
        return []
    steps, lg = steps[after], lg[after]
    events = []
    peak = np.maximum.accumulate(lg)
    floor = np.log2(max(c.min_scale, 1e-30))
    # a constant scale of 1 is bf16/fp32 bookkeeping (Megatron prints it), not a collapse
    at_min = np.flatnonzero((lg <= floor + 1e-9) & (peak >= floor + 1.0))
    # ... or once, where the data ends: DeepSpeed raises at the next overflow there
    # ("Current loss scale already at minimum"), so a log that ends at it ends the run's fp16
    if at_min.size == 1 and at_min[0] == lg.size - 1:
        at_min = np.r_[at_min, at_min]
    tail = max(int(0.1 * lg.size), 2)
    tail_level = float(np.median(lg[-tail:]))
    gap = max(c.calibration_gap_steps, 2 * interval)
    # the descent the run ends in: as deep as a collapse, and never regrown (a run stopped
    # while its scale was still falling: its tail's median is half-way down)
    deep = peak[-1] - lg[-1] >= c.collapse_halvings  # else no fall can be deep enough
    final = _descent_start(steps, lg, hit=lg.size - 1, gap_steps=gap) if deep else None
    fall = float(lg[final - 1] - lg[-1]) if final is not None else 0.0
    falling = fall >= c.collapse_halvings
    collapsed = (
        peak[-1] - tail_level >= c.collapse_halvings and lg[-1] <= tail_level + 1
    ) or falling
    if at_min.size >= 2 or collapsed:
        hit = int(at_min[0]) if at_min.size >= 2 else lg.size - 1 if falling else lg.size - tail
        start = (
            final
            if falling and hit == lg.size - 1
            else _descent_start(steps, lg, hit=hit, gap_steps=gap)
        )
        start = hit if start is None else start
        # a scale logged only at overflows is sparse: the descent starts just before its
        # first drop (one overflow is absorbed by hysteresis), not after the previous point
        onset = (
            max(int(steps[start - 1]) + 1, int(steps[start]) - 1) if start > 0 else int(steps[0])
        )
        kind = "scale_min" if at_min.size >= 2 else "scale_collapse"
        events.append(
            Event(
                kind,
                "loss_scale",
                onset,
                int(steps[-1]),
                "critical",
                0.9,
                f"loss_scale falls from {2 ** lg[max(start - 1, 0)]:.4g} at step {onset} to "
                f"{2 ** lg[hit]:.4g} and ends at {2 ** lg[-1]:.4g}"
                + (
                    f" (at its minimum {c.min_scale:g} at {np.unique(at_min).size} point(s))"
                    if at_min.size >= 2
                    else (
                        f" ({max(peak[-1] - tail_level, fall):.0f} halvings below its peak,"
                        " no recovery)"
                    )
                ),
            )
        )
    return events


def _descent_start(steps: np.ndarray, lg: np.ndarray, *, hit: int, gap_steps: float) -> int | None:
    """Index of the first drop of the descent that reaches ``hit`` (None when no drop does).

    The descent is the drops since the scale last grew that take it below where it stood
    before that growth (a growth probe's drop back is no part of it), or, when there are
    none (the scaler probed or regrew after a collapse), since the growth before, and so on.
    Of those, the last drops no further apart than ``gap_steps`` or three times their median
    spacing: one overflow long before a collapse is not its start, and a scale halving every
    40 steps is one descent (it was dated at the minimum it reached, 600 steps late, when
    drops more than 10 steps apart were separate descents).

    >>> lg = np.array([14, 15, 14, 14, 13, 12, 11.0])  # a probe, then three halvings
    >>> _descent_start(np.arange(7) * 40, lg, hit=6, gap_steps=10)
    4
    >>> lg = np.array([14, 14, 13, 12, 11, 12, 11.0])  # and a probe after the collapse
    >>> _descent_start(np.arange(7) * 40, lg, hit=6, gap_steps=10)
    2
    >>> lg = np.array([10, 9, 9, 9, 8, 7, 6.0])  # one overflow, then a collapse
    >>> _descent_start(np.array([0, 175, 200, 250, 301, 302, 303]), lg, hit=6, gap_steps=10)
    4
    """
    upto = lg[: hit + 1]
    grew = np.flatnonzero(np.diff(upto) > 0) + 1
    later_low = np.minimum.accumulate(upto[::-1])[::-1]  # the lowest from each point on
    # the last growth after which the scale falls below where it stood before it
    fell = grew[later_low[grew] < upto[grew - 1]]
    first = int(fell[-1]) if fell.size else 0
    since = upto[first:]
    lows = np.minimum.accumulate(np.concatenate(([upto[first - 1] if first else upto[0]], since)))
    drops = np.flatnonzero(since < lows[:-1]) + first
    if drops.size == 0:
        return None
    gaps = np.diff(steps[drops])
    allowed = max(gap_steps, 3.0 * float(np.median(gaps))) if gaps.size else gap_steps
    apart = np.flatnonzero(gaps > allowed)
    return int(drops[apart[-1] + 1]) if apart.size else int(drops[0])
