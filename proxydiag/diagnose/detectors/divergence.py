"""Divergence: sustained growth or a level shift of grad norm / loss that does not revert, and
the RL symptoms that follow it (reward collapse, entropy collapse or explosion, KL and
clip-fraction blow-up; docs/failures.md#loss-divergence).

Each metric gets one change-point fit (:mod:`._sustained`): the onset is where the growth
starts (a hinge for a climb, the step for a jump), and the size is the level at the end of the
run against the level before the change, in fold and in robust σ, so a spike that reverts
measures nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from proxydiag.diagnose._stats import safe_log
from proxydiag.diagnose._sustained import Change, sustained_change
from proxydiag.diagnose._warmup import GROWTH_FALLBACK_FRACTION, warmup_end
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event, Severity
from proxydiag.run import Run


@dataclass(frozen=True)
class _Rule:
    metric: str
    kind: str
    sign: int
    severity: Severity
    transform: Callable[[np.ndarray], np.ndarray]
    log: bool  # the transform is a log: the fold is exp(rise)


def _log_pos(x: np.ndarray) -> np.ndarray:
    return safe_log(x, floor=1e-12)


def _ident(x: np.ndarray) -> np.ndarray:
    return x


def _rules(rv: RunView) -> tuple[_Rule, ...]:
    """The checks of a run. An RL run's plain ``loss`` (beside a reward, without a policy
    loss) is its objective (TRL's GRPO: β·KL, which grows as the policy leaves its
    reference), not an LM loss: a blow-up of it is a symptom."""
    rl_loss = rv.has("reward") and not rv.has("pg_loss")
    return (
        _Rule("grad_norm", "divergence", 1, "critical", _log_pos, True),
        _Rule("loss", "pg_loss_blowup", 1, "warning", _log_pos, True)
        if rl_loss
        else _Rule("loss", "divergence", 1, "critical", _log_pos, True),
        _Rule("pg_loss", "pg_loss_blowup", 1, "warning", _log_pos, True),
        _Rule("reward", "reward_collapse", -1, "warning", _ident, False),
        _Rule("entropy", "entropy_collapse", -1, "warning", _log_pos, True),
        _Rule("entropy", "entropy_explosion", 1, "warning", _log_pos, True),
        _Rule("kl", "kl_blowup", 1, "warning", _log_pos, True),
        _Rule("clip_frac", "clip_blowup", 1, "warning", _log_pos, True),
    )


NAME = "divergence"
#: its events decide labels (loss_divergence)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads (a learning rate for the warm-up)."""
    return ("grad_norm", "loss", "pg_loss", "reward", "entropy", "kl", "clip_frac", "lr")


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``divergence`` (critical; grad_norm, loss) and RL symptoms (warning).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(400)
    >>> g = np.exp(rng.normal(0, 0.1, 400) + np.where(t < 250, 0.0, 0.03 * (t - 250)))
    >>> ev = detect(from_arrays({"grad_norm": (t, g)}), DiagnoseConfig())
    >>> [(e.kind, e.metric, abs(e.onset_step - 250) <= 8) for e in ev]
    [('divergence', 'grad_norm', True)]
    """
    rv = view(run)
    warm = warmup_end(rv, fallback_fraction=GROWTH_FALLBACK_FRACTION)
    events = []
    for rule in _rules(rv):
        s = rv.get(rule.metric)
        if s is None:
            continue
        event = _check(s, rule, cfg)
        if event is None:
            continue
        if (
            event.severity == "critical"
            and event.onset_step is not None
            and event.onset_step < warm
        ):
            # grad norms often settle at a new level while the learning rate warms up
            event = replace(
                event,
                severity="warning",
                confidence=0.4,
                evidence=f"{event.evidence} (starts during warm-up, before step {warm})",
            )
        events.append(event)
    return events


def _check(s: Series, rule: _Rule, cfg: DiagnoseConfig) -> Event | None:
    c = cfg.divergence
    ok = s.finite
    if rule.log and rule.metric in ("grad_norm", "loss") and (s.values[ok] <= 0).any():
        rule = _Rule(rule.metric, rule.kind, rule.sign, rule.severity, _ident, False)
    steps, y = s.steps[ok], rule.transform(s.values[ok])
    keep = np.isfinite(y)
    steps, y = steps[keep], y[keep]
    change = sustained_change(
        steps.astype(np.float64),
        y,
        sign=rule.sign,
        tail_fraction=c.tail_fraction,
        sigma_floor=1e-3 if rule.log else 1e-9,
        min_after_steps=cfg.spikes.revert_steps,
    )
    if change is None:
        return None
    kind, severity = rule.kind, rule.severity
    if not _large(change, rule, cfg) and not _below_start(change, rule, cfg, y):
        if not _weak_reward_fall(change, rule, cfg):
            return None
        kind, severity = "reward_decline", "info"
    evidence = _evidence(s.name, change.onset_step, change, rule)
    if (
        rule.kind == "kl_blowup"
        and float(np.exp(change.after)) < c.kl_quiet_level
        and ok[s.steps >= change.onset_step].all()
    ):  # an inf or NaN after it is no quiet KL
        severity = "info"
        evidence += (
            f" (it ends below {c.kl_quiet_level:g}, where a policy leaving its reference "
            "is in healthy runs too)"
        )
    z = change.z
    strength = 1.0 - c.z_min / max(z, c.z_min)
    # a symptom alone is weak evidence (KL grows and entropy falls in healthy RL runs too)
    weight = (0.6, 0.4) if rule.severity == "critical" else (0.4, 0.2)
    conf = float(min(0.99, weight[0] + weight[1] * strength))
    return Event(kind, rule.metric, change.onset_step, None, severity, conf, evidence)


def _large(change: Change, rule: _Rule, cfg: DiagnoseConfig) -> bool:
    c = cfg.divergence
    if rule.sign * change.rise <= 0:  # located going one way, the tail ended the other way
        return False
    if rule.metric == "reward":
        return change.z >= c.reward_z_min
    fold = (
        (c.loss_fold if rule.metric == "loss" else c.min_fold)
        if rule.severity == "critical"
        else c.symptom_fold
    )
    big = abs(change.rise) >= np.log(fold) if rule.log else True
    return bool(big and change.z >= c.z_min)


def _below_start(change: Change, rule: _Rule, cfg: DiagnoseConfig, y: np.ndarray) -> bool:
    """A reward that rose (by more than the spread of its level), then fell and ends below
    where the run started (its first 5%), lost all it learned: a collapse, although that
    learning rise inflates the spread and keeps the fall's z under ``reward_z_min``."""
    if not (
        rule.metric == "reward"
        and rule.sign * change.rise > 0
        and change.z >= cfg.divergence.reward_z_weak
    ):
        return False
    start = float(np.median(y[: max(5, y.size // 20)]))
    return change.after < start < change.before - change.sigma


def _weak_reward_fall(change: Change, rule: _Rule, cfg: DiagnoseConfig) -> bool:
    """A reward that falls and stays down, but less than a collapse (see the taxonomy)."""
    return (
        rule.metric == "reward"
        and rule.sign * change.rise > 0
        and change.z >= cfg.divergence.reward_z_weak
    )


def _evidence(name: str, step: int, change: Change, rule: _Rule) -> str:
    shape = "climbs" if change.kind == "ramp" else "jumps"
    if rule.sign < 0:
        shape = "declines" if change.kind == "ramp" else "drops"
    if rule.log:
        before, after = np.exp(change.before), np.exp(change.after)
        size = f"{after / before:.3g}×"
    else:
        before, after = change.before, change.after
        size = f"{after - before:+.4g}"
    return (
        f"{name} {shape} from step {int(step)}: level {before:.4g} before, {after:.4g} at the end "
        f"of the run ({size}, robust z {change.z:.1f}); it does not revert"
    )
