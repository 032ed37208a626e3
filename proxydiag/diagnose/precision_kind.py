"""The kind of a precision fault: what the shape of the mismatch says to check.

A ``precision_fault`` (rollout and learner disagreeing about token probabilities) has causes
that leave different shapes in the mismatch series that decided it (the root cause's metric),
read in this order:

``on_policy_nonzero``
    the mismatch was logged as exactly 0 at the start (a true on-policy setup: the sampler and
    the learner are meant to agree bit for bit) and is not 0 later;
``from_start``
    the mismatch is beyond its published bound from the first points (a quantized or fp8
    rollout, a recipe or scale mismatch between sampler and learner); "garbage from step 0"
    when it is two orders of magnitude beyond;
``resume_shift``
    a level shift within a few log intervals of a resume from a checkpoint (a restart in the
    run's steps): the resumed learner or sampler lost state (fp32 master weights, the
    sampler's copy);
``export_lag``
    the mismatch rose and came back to its baseline within :data:`LAG_STEPS`, perhaps more
    than once: a low-precision weight export lagging the learner, then catching up;
``sync_sawtooth``
    after the onset it climbs between regular drops (a drift between weight syncs, reset at
    each): stale or partial weight sync every N steps;
``weight_sync``
    one step up that stays (a sync that broke or went stale, a partial sync);
``drift``
    a gradual climb (rounding lag: master weights exported as round-to-nearest bf16, a
    low-precision sampler's error growing with the weights).

Each kind has its evidence (one line of numbers) and the hints that come first in the
diagnosis. The kind is a reading of one series, not a second label: the label and onset stay
the taxonomy's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.diagnose.config import MismatchConfig
from proxydiag.diagnose.mismatch import disagreement, upper_bound
from proxydiag.diagnose.view import RunView
from proxydiag.events import Event

#: log intervals (at least RESUME_STEPS steps) within which a restart explains a shift
RESUME_INTERVALS = 3
RESUME_STEPS = 10
#: a bump that came back within this many steps is a lag caught up
LAG_STEPS = (20, 200)
#: orders of magnitude beyond the bound that read as garbage
GARBAGE_FOLD = 100.0

HINTS: dict[str, tuple[str, ...]] = {
    "on_policy_nonzero": (
        "The run is meant to be exactly on-policy (the mismatch was 0): look for what made "
        "sampler and learner differ from then on — a kernel or batch-invariance setting "
        "switched, a dtype cast added, a weight sync that is not bit-exact.",
    ),
    "from_start": (
        "High from the first step: compare the sampler's and the learner's recipes — "
        "quantization (fp8/int8 rollout), dtypes, RoPE/lm-head precision, tokenizer and "
        "chat template, sampling temperature applied on one side only.",
    ),
    "resume_shift": (
        "A shift right after a resume: check what the checkpoint restored — fp32 master "
        "weights (or only bf16 weights), the optimizer state, and that the sampler reloaded "
        "the resumed weights.",
    ),
    "export_lag": (
        "Rises and catches up: the served weights lag the learner — check the export to the "
        "sampler (round-to-nearest bf16 drops small updates until they accumulate: use "
        "stochastic rounding or export fp32 deltas) and how often it runs.",
    ),
    "sync_sawtooth": (
        "Drifts between regular resets: the sampler is refreshed only every few steps, or "
        "partially — check the weight-sync interval and that every tensor (experts, router, "
        "lm-head) is synced.",
    ),
    "weight_sync": (
        "One step up that stays: a weight sync broke, went stale or skips tensors — compare "
        "checksums of the served weights with the learner's after each sync; or the "
        "sampler's precision changed at that step (an fp8 or quantized rollout turned on).",
    ),
    "drift": (
        "A gradual climb: rounding lag or a low-precision sampler whose error grows with the "
        "weights — compare sampler and learner dtypes, and the export of master weights.",
    ),
}


@dataclass(frozen=True)
class Kind:
    """The kind of a precision fault and the numbers that say so."""

    name: str
    evidence: str

    @property
    def hints(self) -> tuple[str, ...]:
        return HINTS.get(self.name, ())

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.name, "evidence": self.evidence}


def classify(rv: RunView, events: list[Event], root: Event, c: MismatchConfig) -> Kind:
    """The kind of the precision fault whose root cause is ``root`` (``c``: the bounds the
    mismatch detector used)."""
    s = rv.get(root.metric or "")
    if s is None or root.onset_step is None or s.finite.sum() < 6:
        return Kind("drift", "too few points of the mismatch to read its shape")
    ok = s.finite
    steps, x = s.steps[ok], np.abs(disagreement(s.name, s.values[ok]))
    onset = int(root.onset_step)
    for rule in (_on_policy, _from_start, _resume, _lag, _sawtooth, _step):
        found = rule(s.name, steps, x, onset, root=root, rv=rv, events=events, c=c)
        if found is not None:
            return found
    before, after = _medians(steps, x, onset)
    return Kind("drift", f"{s.name} climbs from step {onset} ({_ratio(before, after)})")


def _medians(steps: np.ndarray, x: np.ndarray, onset: int) -> tuple[float, float]:
    before, after = x[steps < onset], x[steps >= onset]
    return (
        float(np.median(before)) if before.size else float("nan"),
        float(np.median(after)) if after.size else float("nan"),
    )


def _ratio(before: float, after: float) -> str:
    if before > 0 and np.isfinite(before) and np.isfinite(after):
        return f"median {before:.3g} before, {after:.3g} after: {after / before:.3g}×"
    return f"median {before:.3g} before, {after:.3g} after"


def _on_policy(name: str, steps: np.ndarray, x: np.ndarray, onset: int, **_: object) -> Kind | None:
    first = x[: max(1, min(3, x.size // 10))]
    later = x[steps >= onset]
    if np.all(first == 0.0) and later.size and np.mean(later != 0.0) >= 0.8:
        return Kind(
            "on_policy_nonzero",
            f"{name} was exactly 0 at step {int(steps[0])} (on-policy) and is non-zero at "
            f"{np.mean(later != 0.0):.0%} of the points from step {onset} "
            f"(median {float(np.median(later)):.3g})",
        )
    return None


def _from_start(
    name: str,
    steps: np.ndarray,
    x: np.ndarray,
    onset: int,
    *,
    root: Event,
    c: MismatchConfig,
    **_: object,
) -> Kind | None:
    if root.kind != "mismatch_level" or onset > int(steps[min(len(steps) - 1, len(steps) // 10)]):
        return None
    level = float(np.median(x[: max(3, x.size // 10)]))
    bound = upper_bound(name, c)
    garbage = bound is not None and bound > 0 and level / bound >= GARBAGE_FOLD
    return Kind(
        "from_start",
        f"{name} is beyond its bound from step {int(steps[0])} (early median {level:.3g})"
        + ("; orders of magnitude beyond it: garbage from step 0" if garbage else ""),
    )


def _resume(
    name: str,
    steps: np.ndarray,
    x: np.ndarray,
    onset: int,
    *,
    rv: RunView,
    events: list[Event],
    **_: object,
) -> Kind | None:
    near = max(RESUME_INTERVALS * rv.interval, RESUME_STEPS)
    restarts = [
        e.onset_step
        for e in events
        if e.kind == "restart" and e.onset_step is not None and abs(e.onset_step - onset) <= near
    ]
    if not restarts:
        return None
    before, after = _medians(steps, x, onset)
    return Kind(
        "resume_shift",
        f"{name} shifts at step {onset}, {abs(onset - restarts[0])} step(s) from the resume "
        f"at step {restarts[0]} ({_ratio(before, after)})",
    )


def _lag(name: str, steps: np.ndarray, x: np.ndarray, onset: int, **_: object) -> Kind | None:
    """Up from the onset, back to the baseline within LAG_STEPS, and staying back a while."""
    base = x[steps < onset]
    if base.size < 5:
        return None
    level = float(np.median(base))
    spread = float(np.median(np.abs(base - level))) * 1.4826 + 1e-12
    back_at = steps[(steps > onset) & (x <= level + 3 * spread)]
    # back for good enough: the next five points all near the baseline
    for b in back_at:
        tail = x[(steps >= b)][:5]
        if tail.size == 5 and np.all(tail <= level + 3 * spread):
            span = int(b) - onset
            if LAG_STEPS[0] <= span <= LAG_STEPS[1]:
                peak = float(x[(steps >= onset) & (steps < b)].max(initial=level))
                return Kind(
                    "export_lag",
                    f"{name} rose from step {onset} (peak {peak:.3g}, baseline {level:.3g}) "
                    f"and was back at its baseline by step {int(b)}, {span} steps later: "
                    "caught up",
                )
            return None
    return None


def _sawtooth(name: str, steps: np.ndarray, x: np.ndarray, onset: int, **_: object) -> Kind | None:
    """Regular drops after the onset between climbs: at least three drops of more than half
    the level, at intervals within 30% of their median."""
    after = steps >= onset
    t, y = steps[after], x[after]
    if y.size < 12:
        return None
    dy = np.diff(y)
    drops = np.flatnonzero(dy < -0.5 * np.maximum(y[:-1], 1e-12))
    if drops.size < 3:
        return None
    gaps = np.diff(t[drops + 1])
    period = float(np.median(gaps))
    if period <= 0 or np.max(np.abs(gaps - period)) > 0.3 * period:
        return None
    rises = np.mean(dy[np.setdiff1d(np.arange(dy.size), drops)] >= 0)
    if rises < 0.6:
        return None
    return Kind(
        "sync_sawtooth",
        f"{name} climbs and drops back every {period:.0f} steps from step {onset} "
        f"({drops.size} drops): a drift between weight syncs",
    )


def _step(
    name: str, steps: np.ndarray, x: np.ndarray, onset: int, *, root: Event, **_: object
) -> Kind | None:
    if root.kind != "mismatch_step":
        return None
    before, after = _medians(steps, x, onset)
    return Kind(
        "weight_sync", f"{name} steps up at step {onset} and stays ({_ratio(before, after)})"
    )


__all__ = ["HINTS", "Kind", "classify"]
