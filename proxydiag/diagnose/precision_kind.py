"""The kind of a precision fault: what the shape of the mismatch says to check.

A ``precision_fault`` (rollout and learner disagreeing about token probabilities) has causes
that leave different shapes in the mismatch series that decided it (the root cause's metric),
read in this order:

``lost_master_weights``
    the gradient norm moved onto the bf16 grid and stayed there (:mod:`.master_weights`): the
    learner lost its fp32 master weights, small updates vanish; seen even where no mismatch
    metric is logged;
``routing_replay_off``
    a routing-replay share changed with (or before) the onset: the replayed share fell or the
    fallback share rose (R3 silently off for part of the batches: the learner routes tokens
    on its own router, not on the rollout's expert choices);
``routing_mismatch``
    the share of tokens whose top-k expert set differs between the two routers rose with (or
    before) the onset: a rollout router computed from stale or lower-precision router weights;
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
from proxydiag.diagnose.detectors.mismatch import disagreement, upper_bound
from proxydiag.diagnose.view import RunView
from proxydiag.events import Event

#: log intervals (at least RESUME_STEPS steps) within which a restart explains a shift
RESUME_INTERVALS = 3
RESUME_STEPS = 10
#: a bump that came back within this many steps is a lag caught up
LAG_STEPS = (20, 200)
#: orders of magnitude beyond the bound that read as garbage
GARBAGE_FOLD = 100.0
#: share of the run within which a cause's own series may lag the root cause
CAUSE_SHARE = 0.05
#: events of a mismatch change (the taxonomy's precision-fault candidates, with
#: ``master_weights_lost``)
CHANGE_KINDS = frozenset(
    {"mismatch_step", "mismatch_climb", "mismatch_corr_drop", "mismatch_level", "mismatch_bump"}
)
#: routing-replay shares, and routing-consistency shares (``aliases.toml``)
ROUTE_REPLAY = ("mismatch_route_replay", "mismatch_route_fallback")
ROUTE_CHANGE = ("mismatch_route_change", "mismatch_route_order_change")


def is_cause(event: Event) -> bool:
    """Whether ``event`` measures a cause of a token-probability mismatch on its own series
    (a routing share, the gradient norm on the bf16 grid) rather than the mismatch itself."""
    return event.kind == "master_weights_lost" or (event.metric or "").startswith(
        (*ROUTE_REPLAY, *ROUTE_CHANGE)
    )


#: events that a precision fault may lead (its lead is reported in steps)
FOLLOWERS = frozenset({"divergence", "policy_collapse", "reward_collapse", "nonfinite"})

HINTS: dict[str, tuple[str, ...]] = {
    "lost_master_weights": (
        "The gradient norm is a bf16 number from then on: check that the fp32 master weights "
        "(and fp32 main gradients) exist — what the last resume restored, the optimizer "
        "wrapper's master-weight setting, a switch to pure-bf16 parameters; updates below "
        "half a bf16 ulp of a weight (2^-9 relative) are rounded away.",
    ),
    "routing_replay_off": (
        "Routing replay is off for part of the batches: check the rollout engine returns the "
        "routed experts for every sample (SGLang/vLLM return_routed_experts), that the "
        "learner's MoE layer and top-k match the engine's, that no fused router path bypasses "
        "replay, and why samples fell back (the R3 skip reasons, rollout aborts).",
    ),
    "routing_mismatch": (
        "The two routers pick different experts for more and more tokens: compare the router "
        "weights the rollout engine serves with the learner's (a stale or partial weight sync "
        "skipping the router), their precision (router logits in fp32 on both sides), and turn "
        "on routing replay (R3).",
    ),
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
    for cause in (_master, _routing):  # read on their own series, whatever the root's
        found = cause(rv, events, root)
        if found is not None:
            return found
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


def _near(rv: RunView) -> int:
    """How far after the root cause a cause measured on its own series may start and still be
    the cause: a few log intervals, or :data:`CAUSE_SHARE` of the run (a first-order routing
    share and a second-order token quantity reach significance at different points of one
    climb)."""
    return int(max(RESUME_INTERVALS * rv.interval, RESUME_STEPS, CAUSE_SHARE * rv.span))


def _by(
    events: list[Event], root: Event, rv: RunView, kinds: frozenset[str], metrics: tuple[str, ...]
) -> Event | None:
    """The earliest critical event of ``kinds`` on one of ``metrics`` starting no later than
    :func:`_near` after the root cause."""
    at = int(root.onset_step or 0) + _near(rv)
    found = [
        e
        for e in events
        if e.kind in kinds
        and e.severity == "critical"
        and e.onset_step is not None
        and (e.metric or "").startswith(metrics)
        and e.onset_step <= at
    ]
    return min(found, key=lambda e: int(e.onset_step or 0)) if found else None


def lead(events: list[Event], onset: int) -> str:
    """The lead of a precision fault starting at ``onset`` over the divergence or collapse
    that followed it ("" when none did)."""
    after = [
        e
        for e in events
        if e.kind in FOLLOWERS
        and e.severity == "critical"
        and e.onset_step is not None
        and e.onset_step > onset
    ]
    if not after:
        return ""
    first = min(after, key=lambda e: int(e.onset_step or 0))
    return (
        f"; it leads the {first.kind.replace('_', ' ')} in {first.metric} at step "
        f"{first.onset_step} by {int(first.onset_step or 0) - onset} steps"
    )


def _master(rv: RunView, events: list[Event], root: Event) -> Kind | None:
    e = _by(events, root, rv, frozenset({"master_weights_lost"}), ("",))
    if e is None:
        return None
    return Kind("lost_master_weights", e.evidence + lead(events, int(e.onset_step or 0)))


def _routing(rv: RunView, events: list[Event], root: Event) -> Kind | None:
    for name, metrics in (("routing_replay_off", ROUTE_REPLAY), ("routing_mismatch", ROUTE_CHANGE)):
        e = _by(events, root, rv, CHANGE_KINDS, metrics)
        if e is None:
            continue
        with_it = sorted(
            (
                o
                for o in events
                if o is not e
                and o.kind in CHANGE_KINDS
                and o.severity == "critical"
                and o.metric is not None
                and not o.metric.startswith((*ROUTE_REPLAY, *ROUTE_CHANGE))
            ),
            key=lambda o: int(o.onset_step or 0),
        )
        also = (
            f"; the token-probability mismatch moves with it ({with_it[0].metric} from step "
            f"{with_it[0].onset_step})"
            if with_it
            else ""
        )
        return Kind(name, e.evidence + also + lead(events, int(e.onset_step or 0)))
    return None


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


__all__ = ["CHANGE_KINDS", "HINTS", "Kind", "classify", "is_cause", "lead"]
