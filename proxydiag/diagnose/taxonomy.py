"""From events to one label, the root cause and its onset, by the order of the symptoms.

Causal reading (docs/failures.md#how-a-label-is-decided):

- a rollout-vs-learner mismatch change that starts before any divergence or overflow is the
  root cause: ``precision_fault``, onset where the mismatch change starts (one that follows a
  cluster of RL symptoms closely is their consequence);
- finite grad-norm / loss growth that starts before any non-finite value or scaler collapse is
  a ``loss_divergence`` (the NaN is its end, not its cause), onset where the growth starts;
  so is an RL policy collapse (:mod:`.collapse`: reward, entropy, KL, clip fraction and grad
  norm leaving their range together, the loss small), onset where its first symptom left;
- non-finite gradients, persistent skipping or a collapsed loss scale without growth before
  them is a ``gradient_overflow``, onset at the first of them;
- otherwise ``healthy`` (benign events stay in the evidence as context).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from proxydiag.diagnose._warmup import warmup_end
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.precision_kind import CHANGE_KINDS, Kind, is_cause
from proxydiag.diagnose.precision_kind import classify as precision_kind
from proxydiag.diagnose.view import RunView
from proxydiag.events import Event
from proxydiag.metrics import SKIP_COUNTERS

#: ``loss_scale_minimum`` is the console reader's "minimum loss scale reached" message,
#: ``overflow_crash`` its traceback right after overflows
OVERFLOW = frozenset(
    {
        "skip_burst",
        "scale_collapse",
        "scale_min",
        "nonfinite",
        "nonfinite_counter",
        "loss_scale_minimum",
        "overflow_crash",
    }
)
DIVERGENCE = frozenset({"divergence", "policy_collapse"})
SYMPTOMS = frozenset(
    {
        "reward_collapse",
        "entropy_collapse",
        "entropy_explosion",
        "kl_blowup",
        "clip_blowup",
        "pg_loss_blowup",
    }
)
#: symptoms that mark a policy breaking down (reward, entropy), not just moving
SYMPTOM_CORE = frozenset({"reward_collapse", "entropy_collapse", "entropy_explosion"})
#: a precision fault's root-cause candidates: a mismatch change (a routing-replay or routing
#: consistency share among them; the streaming statistic's shift), or the gradient norm moving
#: onto the bf16 grid
MISMATCH = CHANGE_KINDS | {"master_weights_lost", "mismatch_shift"}

HINTS: dict[str, tuple[str, ...]] = {
    "gradient_overflow": (
        "fp16: check the loss-scaler settings (initial scale, scale window, hysteresis, min "
        "scale) or move to bf16; bf16: find the first op producing inf/NaN (anomaly hooks).",
        "Lower the learning rate or tighten gradient clipping; check for log(0)/division by "
        "zero in the loss and for reductions accumulated in low precision.",
    ),
    "loss_divergence": (
        "Inspect the batches and rewards just before the onset; roll back to a checkpoint "
        "~100 steps earlier and skip those batches (PaLM practice).",
        "Lower the learning rate or lengthen warm-up, tighten gradient clipping; in RL check "
        "the KL coefficient, clip range and reward scale.",
    ),
    "precision_fault": (
        "Compare sampler and learner dtypes (bf16/fp8 rollout vs fp32 learner); matching "
        "precision (or fp16) removes most rollout-vs-learner mismatch.",
        "Check the weight-sync path from learner to sampler (stale or partial sync): compare "
        "checksums of the served weights after each sync.",
        "Check lm-head precision (MiniMax-M1 keeps it in fp32) and how master weights are "
        "exported to the serving copy (round-to-nearest bf16 export drops small updates).",
    ),
    "healthy": (),
}

#: hints of a root cause that needs its own (before the label's)
ROOT_HINTS: dict[str, tuple[str, ...]] = {
    "policy_collapse": (
        "Policy collapse: roll back to a checkpoint before the onset; look at the samples "
        "around it for reward hacking (length running away, repeated tokens, a reward model "
        "exploited).",
        "Raise the KL coefficient or the entropy bonus, lower the learning rate, tighten the "
        "clip range; check the advantage normalisation and the reward scale.",
    ),
}


@dataclass(frozen=True)
class Verdict:
    label: str
    onset_step: int | None
    confidence: float
    root: Event | None
    chain: tuple[Event, ...]
    hints: tuple[str, ...]
    missing: tuple[str, ...]
    summary: str
    #: the kind of a precision fault (None for other labels)
    kind: Kind | None = None


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics the taxonomy reads beside the detectors' events: what says a
    class was undecidable, the warm-up's learning rate, and the mismatch series the kind of a
    precision fault is read from."""
    return (
        "grad_norm",
        "loss",
        "pg_loss",
        "loss_scale",
        *SKIP_COUNTERS,
        "nonfinite",
        "lr",
        "mismatch*",
    )


def classify(events: list[Event], rv: RunView, cfg: DiagnoseConfig) -> Verdict:
    """Label a run from its events (see the module docstring for the rules)."""
    tol = max(cfg.taxonomy.order_tolerance_steps, int(rv.interval))
    crit = [e for e in events if e.severity == "critical" and e.onset_step is not None]
    mismatch = _mismatch_root([e for e in crit if e.kind in MISMATCH])
    direct = [e for e in crit if e.kind == "divergence"]
    diverge = _first(direct) or _first(
        [
            *(e for e in crit if e.kind in DIVERGENCE),
            *filter(None, [_symptoms_for_divergence(events, rv, mismatch=mismatch, tol=tol)]),
        ]
    )
    overflow = _first(e for e in crit if e.kind in OVERFLOW)
    label, root = _decide(mismatch, diverge, overflow, tol=tol)
    missing = _missing(rv)
    chain = _chain(events, root)
    if not any(len(s) for s in rv.series.values()):
        return Verdict(
            label,
            None,
            0.0,
            None,
            chain,
            (),
            missing,
            "healthy by default (confidence 0.00): the run has none of the metrics "
            "the detectors read.",
        )
    confidence = _confidence(label, root, events, missing)
    kind = (
        precision_kind(rv, events, root, cfg.mismatch)
        if label == "precision_fault" and root
        else None
    )
    summary = _summary(label, root, chain, confidence)
    if kind is not None:
        summary += f" Kind: {kind.name} ({kind.evidence})."
    return Verdict(
        label,
        root.onset_step if root else None,
        confidence,
        root,
        chain,
        (
            *(kind.hints if kind else ()),
            *((*ROOT_HINTS.get(root.kind, ()), *HINTS[label]) if root else HINTS[label]),
        ),
        missing,
        summary,
        kind,
    )


def _decide(
    mismatch: Event | None, diverge: Event | None, overflow: Event | None, *, tol: int
) -> tuple[str, Event | None]:
    """The causal order: a mismatch change that precedes everything else is the cause; growth
    that starts no later than non-finite values or a scaler collapse is a divergence."""
    if mismatch is not None and all(
        other is None or _at(mismatch) < _at(other) - tol for other in (diverge, overflow)
    ):
        return "precision_fault", mismatch
    if diverge is not None and (overflow is None or _at(diverge) <= _at(overflow) + tol):
        return "loss_divergence", diverge
    if overflow is not None:
        return "gradient_overflow", overflow
    return "healthy", None


def _symptoms_for_divergence(
    events: list[Event], rv: RunView, *, mismatch: Event | None, tol: int
) -> Event | None:
    """RL symptoms stand for the divergence when nothing logs the gradient, or when a mismatch
    change follows them closely (a broken policy disagrees with its sampler too, and a grad
    norm too noisy may not show the divergence itself)."""
    gradient = any(rv.has(m) for m in ("grad_norm", "loss", "pg_loss"))
    start = warmup_end(rv)  # RL symptoms that start before it are not counted
    cluster = _symptom_cluster(
        events, rv, start=start, core=SYMPTOM_CORE if gradient else {"reward_collapse"}
    )
    if not gradient:
        return cluster
    follows = (
        cluster is not None
        and mismatch is not None
        and (0 <= _at(mismatch) + tol - _at(cluster) <= 0.1 * rv.span + tol)
    )
    if follows:
        return cluster
    # a reward collapse with two more symptoms (KL and clip fraction blowing up: a policy
    # collapsing into repetition) is a breakdown however the gradient looks
    return _corroborated(events, rv, start=start, tol=tol) or _symptom_cluster(
        events, rv, start=start, core={"reward_collapse"}, least=3
    )


def _corroborated(events: list[Event], rv: RunView, *, start: int, tol: int) -> Event | None:
    """A reward collapse with an entropy collapse (or explosion) is a divergence when the
    gradient agrees: a grad norm (or loss) that moved to another level and did not come back,
    around the same time. Seen in the lab's real GRPO runs with a too-high learning rate: the
    grad norm turns erratic rather than growing smoothly while reward and entropy collapse.

    A smaller reward fall (``reward_decline``: a pruned proxy's noisy reward) counts only with
    an entropy collapse and a gradient that is unstable itself: a level shift, or a burst of
    three or more spikes within 10% of the run from the decline on (two isolated spikes that
    reverted are what healthy runs show); never with the reward-and-entropy pair alone."""
    near = 0.2 * rv.span + tol
    for reward in sorted(
        (
            e
            for e in events
            if e.kind in ("reward_collapse", "reward_decline")
            and e.onset_step is not None
            and _at(e) >= start
        ),
        key=_at,
    ):
        weak = reward.kind == "reward_decline"
        entropy = [
            e
            for e in events
            if e.kind
            in (("entropy_collapse",) if weak else ("entropy_collapse", "entropy_explosion"))
            and e.onset_step is not None
            and abs(_at(e) - _at(reward)) <= near
        ]
        grad = [
            e
            for e in events
            if e.kind in ("level_shift", "spike")
            and e.metric in ("grad_norm", "loss")
            and e.onset_step is not None
            and -near / 2 <= _at(e) - _at(reward) <= near
        ]
        # a lasting shift, or a gradient gone erratic (repeated spikes): either way unstable;
        # a mere decline needs a shift or a burst of spikes after it, and only a shift (not a
        # spike that reverted) may set its onset
        level = [e for e in grad if e.kind == "level_shift"]
        if weak:
            shifts = level or _burst(
                [e for e in grad if e.kind == "spike" and _at(e) >= _at(reward) - tol],
                width=0.1 * rv.span + tol,
            )
        else:
            shifts = level or (grad if len(grad) >= 2 else [])
        # reward and entropy collapsing together within 10% of the run is a policy collapse
        # on its own: healthy RL trades entropy for reward, it does not lose both
        together = [
            e
            for e in entropy
            if e.kind == "entropy_collapse" and abs(_at(e) - _at(reward)) <= 0.1 * rv.span
        ]
        if together and not shifts and not weak:
            shifts = together
        if entropy and shifts:
            # entropy falling is what healthy RL does: the reward collapse or the gradient's
            # shift, whichever comes first, sets the onset
            first = min([reward, *(level if weak else shifts)], key=_at)
            return _divergence_from(
                first,
                min(0.8, reward.confidence),
                f"reward {'declines' if weak else 'collapses'} (step {reward.onset_step}) with "
                f"{entropy[0].kind.replace('_', ' ')} "
                f"and an unstable {shifts[0].metric} ({shifts[0].kind.replace('_', ' ')} at step "
                f"{shifts[0].onset_step}); "
                f"{reward.evidence}",
            )
    return None


def _divergence_from(first: Event, confidence: float, evidence: str) -> Event:
    """A critical divergence from ``first``'s metric and onset on."""
    return Event(
        "divergence", first.metric, first.onset_step, None, "critical", confidence, evidence
    )


def _burst(spikes: list[Event], *, width: float) -> list[Event]:
    """Three or more spikes within ``width`` steps (the first such run of them), else []."""
    found = sorted(spikes, key=_at)
    for i in range(len(found) - 2):
        if _at(found[i + 2]) - _at(found[i]) <= width:
            return found[i:]
    return []


def _at(event: Event) -> int:
    assert event.onset_step is not None
    return event.onset_step


def _first(events: Iterable[Event]) -> Event | None:
    found = sorted(events, key=lambda e: (_at(e), -e.confidence))
    return found[0] if found else None


def _mismatch_root(events: list[Event]) -> Event | None:
    """The precision fault's candidate root cause: the consensus of the token-probability
    mismatch quantities (several measure one disagreement), or, when earlier, a cause of
    such a disagreement measured on its own series — a routing share (replay off, routers
    apart) or the gradient norm on the bf16 grid — which the others follow."""
    causes = [e for e in events if is_cause(e)]
    return _first([*filter(None, [_consensus([e for e in events if not is_cause(e)])]), *causes])


def _consensus(events: list[Event]) -> Event | None:
    """The event at the (lower) median onset: several metrics of one family (e.g. prob diff,
    k3, Pearson) see the same change, and the noisiest of them should not set the onset.
    Maxima (``*_max``: extreme-value statistics, the noisiest) only set it when alone. The
    streaming statistic's ``mismatch_shift`` (:mod:`.mismatch_shift`) decides only when the
    change fit has found nothing yet (it dates a change better once it has the points)."""
    fitted = [e for e in events if e.kind != "mismatch_shift"]
    events = fitted or events
    typical = [e for e in events if not (e.metric or "").endswith("_max")]
    found = sorted(typical or events, key=lambda e: (_at(e), -e.confidence))
    return found[(len(found) - 1) // 2] if found else None


def _symptom_cluster(
    events: list[Event], rv: RunView, *, start: int, core: set[str] | frozenset[str], least: int = 2
) -> Event | None:
    """``least`` or more distinct RL symptoms starting close together (within 10% of the run),
    one of them in ``core``. Entropy falling and KL rising alone are what healthy RL runs do,
    and symptoms that start before ``start`` (the warm-up's end) are not counted."""
    found = sorted(
        (e for e in events if e.kind in SYMPTOMS and e.onset_step is not None and _at(e) >= start),
        key=_at,
    )
    for i, first in enumerate(found):
        near = {e.kind for e in found[i:] if _at(e) - _at(first) <= 0.1 * rv.span}
        if len(near) >= least and near & core:
            return _divergence_from(
                first,
                min(0.8, first.confidence + 0.2),
                f"{len(near)} RL symptoms start together ({', '.join(sorted(near))}) from step "
                f"{first.onset_step}; {first.evidence}",
            )
    return None


#: fault class -> the entry of :func:`_missing` that says the run logs nothing it shows in
UNSEEN_BY = {
    "precision_fault": "mismatch_*",
    "gradient_overflow": "loss_scale",
    "loss_divergence": "loss",
}


def _missing(rv: RunView) -> tuple[str, ...]:
    """What the run does not log, by the signals of each fault class (see :data:`UNSEEN_BY`)."""
    out = []
    if not rv.mismatch_metrics:
        out.append("mismatch_*")
    if not any(rv.has(m) for m in ("grad_norm", "loss_scale", *SKIP_COUNTERS, "nonfinite")):
        out.extend(["grad_norm", "loss_scale"])
    if not any(rv.has(m) for m in ("grad_norm", "loss", "pg_loss")):
        out.extend(m for m in ("grad_norm", "loss") if m not in out)
    return tuple(out)


def _chain(events: list[Event], root: Event | None) -> tuple[Event, ...]:
    """Root cause first, then the other events by onset (critical and warning before info)."""
    rank = {"critical": 0, "warning": 1, "info": 2}
    rest = sorted(
        (e for e in events if e is not root),
        key=lambda e: (rank[e.severity] > 1, e.onset_step if e.onset_step is not None else 0),
    )
    return ((root,) if root is not None else ()) + tuple(rest)


def _confidence(
    label: str, root: Event | None, events: list[Event], missing: tuple[str, ...]
) -> float:
    if root is not None:
        return float(root.confidence)
    worry = max((e.confidence for e in events if e.severity != "info"), default=0.0)
    conf = 0.95 - 0.4 * worry
    if "mismatch_*" in missing:
        conf -= 0.1  # a precision fault could not have been seen
    if "grad_norm" in missing:
        conf -= 0.15  # overflow and divergence judged on fewer signals
    return float(max(conf, 0.3))


def _summary(label: str, root: Event | None, chain: tuple[Event, ...], confidence: float) -> str:
    if root is None:
        return f"healthy (confidence {confidence:.2f}): no failure pattern found."
    after = [
        e
        for e in chain[1:]
        if e.severity == "critical"
        and e.onset_step is not None
        # the streaming statistic seeing the mismatch change the root is: the same change
        and not (e.kind == "mismatch_shift" and root.kind in MISMATCH)
    ]
    follow = (
        f"; then {after[0].kind} in {after[0].metric} from step {after[0].onset_step}"
        if after
        else ""
    )
    return (
        f"{label} from step {root.onset_step} (confidence {confidence:.2f}): "
        f"{root.kind} in {root.metric}{follow}."
    )
