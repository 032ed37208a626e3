"""Mixture-of-experts routing: an auxiliary loss that jumps, routing that concentrates.

Evidence, not a label: in MoE runs these often precede a divergence (routing collapse onto a
few experts shows in the load-balancing loss, the max expert load and the router entropy
before the LM loss breaks: ST-MoE, Zoph et al. 2022, §3 on router z-loss and instabilities;
OLMoE, Muennighoff et al. 2024, on load-balancing and router z-loss). Each metric gets the same
sustained change fit as the divergence detector (:mod:`._sustained`): a change that reverts
measures nothing. Events are ``warning``s the taxonomy does not count; the watcher reports how
many steps they led a divergence's own onset.

Thresholds (module constants): a sustained rise of the load-balancing loss or max expert load
to :data:`LOAD_FOLD` (2×) its level before, of the z-loss to :data:`Z_LOSS_FOLD` (3×: it
scales with the square of the router logits), or a fall of the router entropy below
1/:data:`ENTROPY_FOLD` of it, each at least :data:`Z_MIN` robust σ (the divergence detector's
``z_min``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.diagnose._stats import safe_log
from proxydiag.diagnose._sustained import sustained_change
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.run import Run

#: the canonical router metrics (``aliases.toml``)
METRICS = ("router_aux_loss", "router_z_loss", "router_entropy", "expert_load_max")
LOAD_FOLD = 2.0
Z_LOSS_FOLD = 3.0
ENTROPY_FOLD = 1.5
Z_MIN = 4.0


@dataclass(frozen=True)
class _Rule:
    metric: str
    kind: str
    sign: int
    fold: float


RULES = (
    _Rule("router_aux_loss", "router_loss_jump", 1, LOAD_FOLD),
    _Rule("router_z_loss", "router_loss_jump", 1, Z_LOSS_FOLD),
    _Rule("expert_load_max", "router_concentration", 1, LOAD_FOLD),
    _Rule("router_entropy", "router_concentration", -1, ENTROPY_FOLD),
)


NAME = "router"
#: its events decide labels (loss_divergence: router evidence)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads."""
    return METRICS


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``router_loss_jump`` and ``router_concentration`` (warnings).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(300)
    >>> aux = np.exp(rng.normal(0, 0.05, 300) + np.where(t < 200, 0.0, 1.5))
    >>> [(e.kind, e.onset_step) for e in detect(from_arrays({"router_aux_loss": (t, aux)}),
    ...                                          DiagnoseConfig())]
    [('router_loss_jump', 200)]
    """
    rv = view(run)
    events = []
    for rule in RULES:
        s = rv.get(rule.metric)
        if s is not None and int(s.finite.sum()) >= 12:
            event = _check(s, rule, cfg)
            if event is not None:
                events.append(event)
    return events


def _check(s: Series, rule: _Rule, cfg: DiagnoseConfig) -> Event | None:
    ok = s.finite & (s.values > 0)
    steps, y = s.steps[ok], safe_log(s.values[ok], floor=1e-12)
    change = sustained_change(
        steps.astype(np.float64),
        y,
        sign=rule.sign,
        tail_fraction=cfg.divergence.tail_fraction,
        sigma_floor=1e-3,
        min_after_steps=cfg.spikes.revert_steps,
    )
    if change is None or rule.sign * change.rise < np.log(rule.fold) or change.z < Z_MIN:
        return None
    before, after = float(np.exp(change.before)), float(np.exp(change.after))
    shape = "rises" if rule.sign > 0 else "falls"
    return Event(
        rule.kind,
        rule.metric,
        change.onset_step,
        None,
        "warning",
        float(min(0.9, 0.5 + 0.4 * (1 - Z_MIN / max(change.z, Z_MIN)))),
        f"{rule.metric} {shape} from step {change.onset_step}: {before:.4g} before, {after:.4g} "
        f"at the end ({after / before:.3g}x, robust z {change.z:.1f}); routing often "
        "concentrates before a loss diverges",
    )
