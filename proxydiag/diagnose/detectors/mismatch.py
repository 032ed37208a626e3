"""Rollout-vs-learner mismatch: a step change (broken or stale weight sync) or a gradual climb
(rounding lag, low-precision sampler), from whichever mismatch metric the run logs.

Every metric of the ``mismatch*`` family is turned into a "badness" that grows with the
disagreement (|p diff|, |k1|, k3, |log p diff|, 1 − Pearson, |log IS mean|, 1 − ESS) on log
scale; the change is measured against the run's own early baseline (relative) and against the
published bounds (absolute; docs/failures.md#signatures-and-published-bounds): veRL Ascend guide
``probs_diff_mean`` ≤ 0.01; veRL ``rollout_corr`` warnings |kl| > 0.1, ``chi2_token`` > 1, IS mean ∉
[0.5, 2], ESS < 0.3; healthy Pearson ≈ 0.999. The onset of a climb is where the climb starts, not
where it crosses a bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from proxydiag.diagnose._stats import block_level, rolling_median, runs_of, safe_log
from proxydiag.diagnose._sustained import Change, sustained_change
from proxydiag.diagnose.config import DiagnoseConfig, MismatchConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.run import Run

Badness = Callable[[np.ndarray], np.ndarray]

#: at most this many left splits when looking for the earliest change
MAX_SPLITS = 6
#: last points whose median may be a change's sustained height: a tenth of a 3,000-step run
#: logged every 10 steps (30 points) saw a 5x climb over its last 40 points at 3.5x
PEAK_POINTS = 10


def disagreement(metric: str, x: np.ndarray) -> np.ndarray:
    """A metric's values as a disagreement that is 0 when sampler and learner agree (its
    magnitude is what grows): 1 − x for a correlation or an ESS, log x for a ratio whose
    perfect value is 1 (IS mean, NeMo-RL's multiplicative error), else the value.

    >>> disagreement("mismatch_corr", np.array([0.999])).round(3).tolist()
    [0.001]
    """
    x = np.asarray(x, dtype=np.float64)
    if metric.startswith(("mismatch_corr", "mismatch_is_ess", "mismatch_route_replay")):
        return 1.0 - x
    if metric.startswith(("mismatch_is_mean", "mismatch_prob_error")):
        return safe_log(x, floor=1e-12)
    return x


def published_bound(metric: str, c: MismatchConfig) -> float | None:
    """A metric's published bound as the stack logs it (None: it has none, or a range)."""
    return {
        "mismatch_prob_diff": c.prob_diff_bound,
        "mismatch_kl": c.kl_bound,
        "mismatch_chi2": c.chi2_bound,
        "mismatch_is_ess": c.ess_bound,
        "mismatch_corr": c.corr_bound,
        "mismatch_prob_error": c.prob_error_bound,
        "mismatch_route_replay": c.route_replay_bound,
        "mismatch_route_fallback": c.route_fallback_bound,
    }.get(metric)


def upper_bound(metric: str, c: MismatchConfig) -> float | None:
    """A metric's published bound as a :func:`disagreement` (None: it has none, or a range)."""
    value = published_bound(metric, c)
    return None if value is None else float(np.abs(disagreement(metric, np.array([value])))[0])


#: routing shares (replayed, fallen back, changed top-k set) are counts over a batch's token
#: routes: a share below these is a handful of routes (rollout aborts, ties), not a level
ROUTE_FLOORS = {
    "mismatch_route_replay": 1e-3,
    "mismatch_route_fallback": 1e-3,
    "mismatch_route_change": 1e-4,
    "mismatch_route_order_change": 1e-4,
}


#: a routing share moves by whole routes of its batch: fewer than this many routes are ties
#: and aborts, not a level (a small batch's one route can be far above ROUTE_FLOORS)
HANDFUL_ROUTES = 5


def route_unit(x: np.ndarray) -> float:
    """The share one route makes, where a routing share's values show it (0.0 where they do
    not): a share that counts routes of a small batch returns to 0 (at least a tenth of its
    points) and its values up to :data:`HANDFUL_ROUTES` times its smallest one are whole
    multiples of it (±0.1, and ±5% more per route: batches differ a little in size), at
    least five values and two different multiples among them; then that smallest value is
    one route. A share averaged over many routes or micro-batches shows no unit.

    >>> float(route_unit(np.array([0, 1, 0, 2, 1, 0, 3, 0, 1, 8]) / 1280) * 1280)
    1.0
    >>> float(route_unit(np.array([0, 0.021, 0.034, 0.029, 0.05, 0.3])))
    0.0
    """
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    pos = x[x > 0]
    if pos.size < 3 or np.mean(x == 0) < 0.1:
        return 0.0
    unit = float(pos.min())
    k = pos / unit
    small = k[k < HANDFUL_ROUTES + 0.5]
    whole = np.abs(small - np.round(small)) <= 0.1 + 0.05 * np.round(small)
    if small.size < 5 or np.mean(whole) < 0.9 or np.unique(np.round(small[whole])).size < 2:
        return 0.0
    return unit


def _badness(metric: str, floor: float = 1e-9) -> Badness:
    """How a metric's values become a disagreement that grows (log scale); ``floor``: the
    smallest |value| told apart (see :func:`_floor`)."""
    if metric.startswith("mismatch_corr"):
        floor = 1e-6
    elif metric.startswith(tuple(ROUTE_FLOORS)):
        floor = max(floor, ROUTE_FLOORS[next(p for p in ROUTE_FLOORS if metric.startswith(p))])
    elif metric.startswith(("mismatch_is_mean", "mismatch_prob_error")):
        floor = 1e-5
    elif metric.startswith("mismatch_is_ess"):
        floor = 1e-4
    return lambda x: safe_log(disagreement(metric, x), floor=floor)


def _floor(metric: str, x: np.ndarray, c: MismatchConfig) -> float:
    """The smallest |value| worth telling apart. A routing share: :data:`HANDFUL_ROUTES` of
    its routes where its values show what one route is (:func:`route_unit`), else its
    ``ROUTE_FLOORS`` entry. k1 (``mismatch_kl``) is a signed estimate:
    while rollout and learner agree it may wander around zero, and log|k1| of such a
    baseline is noise spanning e-folds (±1e-3 and 1e-6 alike) that hides a climb to the
    published bound. When a fifth of the early baseline is zero or negative, values within
    twice its typical |k1| are one level: a climb is measured above that. Else 1e-9.

    >>> x = np.concatenate((np.tile([1e-3, -1e-3, 2e-6], 20), [0.2] * 60))
    >>> float(_floor("mismatch_kl", x, MismatchConfig()))
    0.002
    >>> float(_floor("mismatch_kl", np.abs(x), MismatchConfig()))  # positive: as it is
    1e-09
    """
    if metric.startswith(tuple(ROUTE_FLOORS)):
        return max(HANDFUL_ROUTES * route_unit(disagreement(metric, x)), 1e-9)
    if metric != "mismatch_kl" or not x.size:
        return 1e-9
    base = x[: max(int(c.baseline_fraction * x.size), 10)]
    if np.mean(base <= 0) < 0.2:
        return 1e-9
    return max(2.0 * float(np.median(np.abs(base))), 1e-9)


def _order(metric: str) -> int:
    """How a metric scales with a first-order disagreement (|Δp|, |Δlog p|): KL (k1, k3),
    χ², 1 − Pearson, |log IS mean| and 1 − ESS are second order (variance-like)."""
    second = ("mismatch_kl", "mismatch_k3", "mismatch_chi2", "mismatch_corr", "mismatch_is")
    return 2 if metric.startswith(second) else 1


def _beyond_bound(
    metric: str, level: np.ndarray, c: MismatchConfig
) -> tuple[np.ndarray, str] | None:
    """Where the (smoothed) value is beyond its published bound, and the bound as text."""
    if metric == "mismatch_prob_diff":
        return level > c.prob_diff_bound, f"> {c.prob_diff_bound:g} (veRL Ascend guide)"
    if metric == "mismatch_kl":
        return np.abs(level) > c.kl_bound, f"|kl| > {c.kl_bound:g} (veRL rollout_corr)"
    if metric == "mismatch_chi2":
        return level > c.chi2_bound, f"> {c.chi2_bound:g} (veRL rollout_corr)"
    if metric == "mismatch_is_mean":
        out = (level < c.is_mean_low) | (level > c.is_mean_high)
        return out, f"outside [{c.is_mean_low:g}, {c.is_mean_high:g}] (veRL rollout_corr)"
    if metric == "mismatch_is_ess":
        return level < c.ess_bound, f"< {c.ess_bound:g} (veRL rollout_corr)"
    if metric == "mismatch_corr":
        return level < c.corr_bound, f"< {c.corr_bound:g} (healthy Pearson ≈ 0.999)"
    if metric == "mismatch_prob_error":
        return level > c.prob_error_bound, f"> {c.prob_error_bound:g} (NeMo-RL)"
    if metric == "mismatch_route_replay":
        return level < c.route_replay_bound, f"< {c.route_replay_bound:g} (R3 replay near 1.0)"
    if metric == "mismatch_route_fallback":
        return (
            level > c.route_fallback_bound,
            f"> {c.route_fallback_bound:g} (R3 fallback near zero)",
        )
    return None


NAME = "mismatch"
#: its events decide labels (precision_fault)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads: every mismatch quantity (a prefix)."""
    return ("mismatch*",)


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``mismatch_step`` / ``mismatch_climb`` / ``mismatch_corr_drop`` (critical) and
    ``mismatch_level`` (beyond a published bound without a change against the baseline:
    critical when it is so from the start and stays so, else a warning).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(300)
    >>> d = 0.003 * np.exp(rng.normal(0, 0.1, 300)) + np.where(t < 180, 0.0, 0.0004 * (t - 180))
    >>> [
    ...     (e.kind, abs(e.onset_step - 180) <= 6)
    ...     for e in detect(from_arrays({"mismatch_prob_diff": (t, d)}), DiagnoseConfig())
    ... ]
    [('mismatch_climb', True)]
    """
    rv = view(run)
    events = []
    for metric in rv.mismatch_metrics:
        s = rv.get(metric)
        if s is None:
            continue
        event = _check(s, cfg.mismatch) if s.finite.sum() >= MIN_BOUND_POINTS else None
        if event is not None:
            events.append(event)
    out = [_spread_warning(rv, e, cfg.mismatch) for e in events]
    return out + _disagreements(rv, [e for e in out if e.severity == "critical"], cfg.mismatch)


#: token-mismatch quantities a correlation's change is checked against (a KL k1 estimate is
#: not one: it can miss what the correlation catches, veRL's broken plumbing)
SPREAD_WITNESSES = ("mismatch_prob_diff", "mismatch_logp_diff", "mismatch_k3", "mismatch_chi2")
#: points after the onset a witness needs to say it stayed flat
SPREAD_POINTS = 3


def spread_artefact(rv: RunView, metric: str, onset: int, c: MismatchConfig) -> str:
    """Why a change of the Pearson correlation ``metric`` from ``onset`` is the probabilities'
    spread rather than a disagreement ("" when it may be one): 1 − r of the two probability
    vectors grows as their spread shrinks — a policy that sharpens puts most tokens near 1 —
    with the same differences. So a correlation that stays within its healthy bound
    (``corr_bound``) while a logged probability or log-probability difference, k3 or χ² (the
    means, not the maxima) stays within ``agree_fold`` of its level before (medians, at least
    :data:`SPREAD_POINTS` points after) measures no disagreement."""
    s = rv.get(metric)
    if s is None or not metric.startswith("mismatch_corr"):
        return ""
    after = s.values[s.finite & (s.steps >= onset)]
    if after.size == 0 or float(np.min(after)) < c.corr_bound:
        return ""
    for other in rv.mismatch_metrics:
        w = rv.get(other)
        if w is None or not other.startswith(SPREAD_WITNESSES) or other.endswith("_max"):
            continue
        ok = w.finite
        steps, x = w.steps[ok], np.abs(disagreement(other, w.values[ok]))
        before, later = x[steps < onset], x[steps >= onset]
        if before.size < 5 or later.size < SPREAD_POINTS:
            continue
        base, now = float(np.median(before)), float(np.median(later))
        if base > 0 and now <= c.agree_fold * base:
            return (
                f"{metric} stays at or above {float(np.min(after)):.6g} (within its healthy "
                f"bound {c.corr_bound:g}) while {other} stays at {now / base:.2f}× its level "
                "before: the probabilities' spread shrank (a sharpening policy), not their "
                "agreement"
            )
    return ""


def _spread_warning(rv: RunView, e: Event, c: MismatchConfig) -> Event:
    """``e`` as a warning when :func:`spread_artefact` explains it."""
    if e.severity != "critical" or e.onset_step is None:
        return e
    why = spread_artefact(rv, e.metric or "", int(e.onset_step), c)
    if not why:
        return e
    return Event(
        e.kind, e.metric, e.onset_step, e.end_step, "warning", e.confidence, e.evidence + "; " + why
    )


#: finite points a change needs (a baseline and points after it) ...
MIN_POINTS = 12
#: ... and a level beyond a published bound on every point so far (a young or sparsely
#: logged run: a mismatch beyond its bound from the first step is there to see at once)
MIN_BOUND_POINTS = 4


#: a mismatch metric's family (quantities measured different ways), by name prefix
FAMILIES = (
    ("mismatch_prob_diff", "probability difference"),
    ("mismatch_prob_error", "multiplicative error"),
    ("mismatch_logp_diff", "log-probability difference"),
    ("mismatch_kl", "KL"),
    ("mismatch_k3", "KL"),
    ("mismatch_chi2", "chi-square"),
    ("mismatch_is", "importance weight"),
    ("mismatch_corr", "correlation"),
    ("mismatch_tail", "tail share"),
    ("mismatch_masked", "masked share"),
    ("mismatch_route_replay", "routing replay"),
    ("mismatch_route_fallback", "routing replay"),
    ("mismatch_route_change", "routing change"),
    ("mismatch_route_order_change", "routing change"),
)


def family(metric: str) -> str:
    """The family of a mismatch metric (its name when unknown)."""
    return next((f for prefix, f in FAMILIES if metric.startswith(prefix)), metric)


def _fold(s: Series, onset: int, c: MismatchConfig) -> float | None:
    """How many times its disagreement before ``onset`` a metric's disagreement is after it
    (medians; None with fewer than 5 finite points on either side)."""
    ok = s.finite
    steps, x = s.steps[ok], s.values[ok]
    y = np.exp(_badness(s.name, _floor(s.name, x, c))(x))
    before, after = y[steps < onset], y[steps >= onset]
    if before.size < 5 or after.size < 5:
        return None
    base = float(np.median(before))
    return float(np.median(after)) / base if base > 0 else None


def _disagreements(rv: RunView, events: list[Event], c: MismatchConfig) -> list[Event]:
    """A warning on each logged mismatch quantity of another family that stays flat while one
    that changed is ``disagree_fold`` times its baseline: the quantities disagree (a mean
    probability difference hides what happens to unlikely tokens; a KL or log-prob difference
    weighs them), so which one the stack computes, and over which tokens, matters."""
    out = []
    changed = [e for e in events if e.kind in ("mismatch_step", "mismatch_climb")]
    for e in changed:
        moved = rv.get(e.metric or "")
        if moved is None or e.onset_step is None:
            continue
        fold = _fold(moved, e.onset_step, c)
        if fold is None or fold < c.disagree_fold:
            continue
        for other in rv.mismatch_metrics:
            s = rv.get(other)
            if s is None or family(other) == family(moved.name) or s.finite.sum() < 12:
                continue
            if any(x.metric == other for x in events):
                continue
            flat = _fold(s, e.onset_step, c)
            if flat is None or flat > c.agree_fold:
                continue
            out.append(
                Event(
                    "mismatch_disagree",
                    other,
                    e.onset_step,
                    None,
                    "warning",
                    0.6,
                    f"{moved.name} ({family(moved.name)}) is {fold:.3g}× its baseline from step "
                    f"{e.onset_step} while {other} ({family(other)}) stays within {flat:.2f}× "
                    "of its own: the mismatch quantities disagree; check which tokens each is "
                    "computed over (a mean probability difference hides unlikely tokens, a KL "
                    "or log-prob difference weighs them)",
                )
            )
    return out


#: points of the median a routing share is read through
ROUTE_SMOOTH_POINTS = 5


def route_level(x: np.ndarray) -> np.ndarray:
    """A routing share as the median of :data:`ROUTE_SMOOTH_POINTS` points around each (at
    the ends, of the last or first ones): its baseline is exactly its perfect value (all routes
    replayed, none changed) but for a skipped micro-batch now and then (a rollout abort), and
    one or two such points — at the end of a run being watched too — are no level.

    >>> route_level(np.array([0, 0, 0, 0, 0.02, 0, 0, 0, 0.01, 0.02])).tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    >>> route_level(np.array([0, 0, 0, 0, 0.3, 0.3, 0.3, 0.3])).tolist()[3:]
    [0.0, 0.3, 0.3, 0.3, 0.3]
    """
    x = np.asarray(x, dtype=np.float64)
    w = ROUTE_SMOOTH_POINTS
    if x.size < w:
        return x
    h = w // 2
    out = rolling_median(x, window_points=w, center=True)
    out[:h] = float(np.median(x[:w]))
    out[x.size - h :] = float(np.median(x[-w:]))
    return out


def _check(s: Series, c: MismatchConfig) -> Event | None:
    ok = s.finite
    steps, x = s.steps[ok], s.values[ok]
    floor = _floor(s.name, x, c)  # on the values as logged: a route's share shows there
    if s.name.startswith(tuple(ROUTE_FLOORS)):
        x = route_level(x)
    y = _badness(s.name, floor)(x)
    n = y.size
    level = block_level(x, window_points=max(3, n // 20))
    bound = _beyond_bound(s.name, level, c)
    found = _earliest_change(steps.astype(np.float64), y, bound=bound, c=c, order=_order(s.name))
    if found is not None:
        change, over = found
        return _event(s, steps, x, change, bound[1] if bound and over else None, c)
    if bound is not None and bound[0].any():
        return _level_event(s, steps, level, bound, c)
    return _bump(s, steps, x, y, c, order=_order(s.name))


#: a bump that came back is a fault when it stood this long (steps, logged points, and a
#: share of the run's points: shorter, it is a glitch that reverted)
BUMP_STEPS = 20
BUMP_POINTS = 5
BUMP_SHARE = 0.05


def _bump(
    s: Series, steps: np.ndarray, x: np.ndarray, y: np.ndarray, c: MismatchConfig, *, order: int
) -> Event | None:
    """A stretch of ``strong_fold`` times the baseline's disagreement (squared for a
    second-order measure) and ``z_min`` robust σ above it, standing BUMP_STEPS steps,
    BUMP_POINTS points and BUMP_SHARE of the run's points, that came back: updates lost for
    a while, then caught up (a low-precision export lagging the learner). Its onset is where
    the level left the baseline's 3 σ before the stretch."""
    base_n = max(int(c.baseline_fraction * y.size), 10)
    if y.size < base_n + BUMP_POINTS:
        return None
    base = y[:base_n]
    level = float(np.median(base))
    sigma = max(1.4826 * float(np.median(np.abs(base - level))), 0.02)
    smooth = rolling_median(y, window_points=3)
    rise = order * np.log(c.strong_fold)
    high = (smooth - level >= rise) & ((smooth - level) / sigma >= c.z_min)
    high[:base_n] = False
    starts, ends = runs_of(high)
    least = max(BUMP_POINTS, int(np.ceil(BUMP_SHARE * y.size)))
    for a, b in zip(starts, ends, strict=True):
        if b - a < least or int(steps[b - 1]) - int(steps[a]) < BUMP_STEPS:
            continue
        left = a
        while left > base_n and smooth[left - 1] - level > 3 * sigma:
            left -= 1
        onset = int(steps[left])
        peak = (
            float(np.max(x[a:b]))
            if not s.name.startswith(("mismatch_corr", "mismatch_route_replay"))
            else float(np.min(x[a:b]))
        )
        base_x = float(np.median(x[:base_n]))
        back = int(steps[b]) if b < steps.size else None
        return Event(
            "mismatch_bump",
            s.name,
            onset,
            back,
            "critical",
            0.7,
            f"{s.name} rises at step {onset}: {base_x:.4g} in the early baseline, up to "
            f"{peak:.4g} ({float(np.exp(np.max(smooth[a:b]) - level)):.3g}× the baseline's "
            f"disagreement) for {int(steps[b - 1]) - int(steps[a])} steps"
            + (f", back to its baseline by step {back}" if back is not None else ""),
        )
    return None


def _level_event(
    s: Series,
    steps: np.ndarray,
    level: np.ndarray,
    bound: tuple[np.ndarray, str],
    c: MismatchConfig,
) -> Event:
    """Beyond the published bound without a change against the run's own baseline: a
    precision fault from the start (e.g. an fp8 sampler: ≈0.012 vs bf16 ≈0.003) when the
    baseline itself is beyond it and the level stays there (≥ 80% of the run); else a warning."""
    beyond = bound[0]
    first = int(np.flatnonzero(beyond)[0])
    base_n = max(int(c.baseline_fraction * beyond.size), 3)
    from_start = bool(beyond[:base_n].mean() > 0.5 and beyond.mean() >= 0.8)
    return Event(
        "mismatch_level",
        s.name,
        int(steps[first]),
        None,
        "critical" if from_start else "warning",
        0.7 if from_start else 0.5,
        f"{s.name} is beyond its published bound {bound[1]} from step {int(steps[first])} "
        f"(level {level[first]:.4g}) "
        + (
            f"and stays there ({beyond.mean():.0%} of the run): disagreement from the start"
            if from_start
            else "without a change against its own early baseline"
        ),
    )


def _earliest_change(
    t: np.ndarray,
    y: np.ndarray,
    *,
    bound: tuple[np.ndarray, str] | None,
    c: MismatchConfig,
    order: int,
) -> tuple[Change, bool] | None:
    """The earliest significant change: after finding one, look again before it (binary
    segmentation to the left), because a climb that later tips the run into divergence is
    followed by a larger jump, and the onset is where the first climb starts."""
    base_n = max(int(c.baseline_fraction * y.size), 10)
    best: tuple[Change, bool] | None = None
    end = y.size
    for _ in range(MAX_SPLITS):
        if end < 12:
            break
        change = sustained_change(
            t[:end],
            y[:end],
            sign=1,
            after="peak",
            baseline_points=base_n,
            sigma_floor=0.02,
            locate_power=1.0 / order,
            peak_points=PEAK_POINTS,
        )
        if change is None:
            break
        over = bound is not None and bool(bound[0][change.index : end].any())
        # min_fold is a first-order disagreement's: a second-order measure (KL, χ², 1 − ESS)
        # moves with its square (a benign 2.2x drift of |Δp| is 4.3x in k3)
        relative = (
            change.rise >= order * np.log(c.min_fold)
            and change.z >= c.z_min
            and _holds(y[change.index : end], change.before + 0.5 * change.rise)
        )
        if relative and best is not None:
            # left of a decisive change, a relative one dates where the climb began (an
            # accelerating climb has reached only ~3x where the decisive change is found)
            best = (change, over or best[1])
        elif relative and (over or change.rise >= np.log(c.strong_fold)):
            best = (change, over)
        end = change.index  # an earlier change may stand out once the later one is cut off
    return best


def _holds(y: np.ndarray, floor: float) -> bool:
    """Once the level (medians of 3 points) has reached ``floor``, it stays there up to the
    end of ``y`` but for short dips (under a tenth of the stretch, at least 3 points): a
    change that came back down (a bump that reverted) is no change, whatever follows it.

    >>> (
    ...     bool(_holds(np.r_[np.zeros(5), np.ones(10)], 0.5)),
    ...     bool(_holds(np.r_[np.ones(5), np.zeros(10)], 0.5)),
    ... )
    (True, False)
    """
    if y.size < 3:
        return bool(y.size) and float(np.median(y)) >= floor
    above = rolling_median(y, window_points=3)[2:] >= floor  # full windows only
    if not above.any() or not above[-1]:
        return False
    starts, ends = runs_of(~above[int(np.argmax(above)) :])
    longest = int((ends - starts).max()) if starts.size else 0
    return longest < max(3, y.size // 10)


def _event(
    s: Series,
    steps: np.ndarray,
    x: np.ndarray,
    change: Change,
    bound: str | None,
    c: MismatchConfig,
) -> Event:
    k = change.index
    base_x = float(np.median(x[: max(min(int(c.baseline_fraction * x.size), k), 3)]))
    if change.kind == "step":
        peak_x = float(np.median(x[k:]))
    else:  # the most extreme level: the largest disagreement (lowest Pearson or ESS, ...)
        levels = block_level(x[k:], window_points=max(3, x.size // 20))
        peak_x = float(levels[np.nanargmax(_badness(s.name)(levels))])
    if s.name.startswith(("mismatch_corr", "mismatch_route_replay")):
        kind, shape = "mismatch_corr_drop", "drops"
    elif change.kind == "step":  # the disagreement grows: ESS and an IS mean below 1 fall
        kind, shape = "mismatch_step", "steps up" if peak_x >= base_x else "steps down"
    else:
        kind, shape = "mismatch_climb", "starts climbing" if peak_x >= base_x else "starts falling"
    fold = float(np.exp(change.rise))
    conf = float(
        min(0.99, 0.6 + 0.2 * (bound is not None) + 0.2 * (1 - c.z_min / max(change.z, c.z_min)))
    )
    return Event(
        kind,
        s.name,
        change.onset_step,
        None,
        "critical",
        conf,
        f"{s.name} {shape} at step {change.onset_step}: {base_x:.4g} in the early baseline, "
        f"{peak_x:.4g} after ({fold:.3g}× the baseline's disagreement, robust z {change.z:.1f})"
        + (f"; beyond the published bound {bound}" if bound else ""),
    )
