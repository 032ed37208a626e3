"""Proxies: the full run's dynamics with systematic differences that grow with pruning, and
how a proxy relates to its full run's fault.

A proxy keeps a fraction of the experts (50%, 25%, 12.5%: pruning level 1, 2, 3 doublings).
Per level it reaches a lower reward ceiling, learns a little slower, has larger and noisier
gradients (less fp16 headroom) and a slightly larger rollout mismatch — the differences a
structure-preserving, clustering-based pruning leaves
(docs/failures.md#the-setting-proxy-runs-of-rl-post-training).

==============  ================  ====================================================
relation        pair ``why``       the proxy ...
==============  ================  ====================================================
``reproduce``   ""                has the full run's fault at nearly the same onset
``late``        ``fault_late``    has it 15–25% of the run later
``early``       ``fault_early``   has it 15–25% of the run earlier
``miss``        ``fault_missing`` stays healthy
``wrong``       ``wrong_fault``   shows a fault of another class
``extra``       ``extra_fault``   fails although the full run is healthy
``trend``       ``trend``         does not learn (flat reward and entropy)
``dynamics``    ``dynamics``      reproduces the fault, with 3.5× noise, 2.5× time constants
``stall``       ``trend``         reproduces the fault but does not learn before it
``grads``       ``dynamics``      reproduces the fault with 4× larger, 3× noisier grad norms
``collapse``    ``dynamics``      reproduces the fault, entropy collapsing 5× faster before it
==============  ================  ====================================================

The last three keep the fault and change only what comes before it: a whole-run score that
the fault's excursion dominates does not see them; the pre-fault phase of ``compare`` must.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from proxydiag.synth.dynamics import Dynamics
from proxydiag.synth.scenario import START_VARIANTS, VARIANT_CLASS, FaultSpec

RELATION_WHY: dict[str, str] = {
    "reproduce": "",
    "late": "fault_late",
    "early": "fault_early",
    "miss": "fault_missing",
    "wrong": "wrong_fault",
    "extra": "extra_fault",
    "trend": "trend",
    "dynamics": "dynamics",
    "stall": "trend",
    "grads": "dynamics",
    "collapse": "dynamics",
}
#: relation -> which phases of its comparison (:mod:`proxydiag.fidelity.phases`) are faithful:
#: the truth ``bench compare`` scores each phase's verdict against (``whole`` for a healthy
#: full run; a fault's timing or class is judged by the fault test, not by a phase)
RELATION_PHASES: dict[str, dict[str, bool]] = {
    "reproduce": {"whole": True, "pre_fault": True, "fault": True},
    "stall": {"pre_fault": False, "fault": True},
    "grads": {"pre_fault": False, "fault": True},
    "collapse": {"pre_fault": False, "fault": True},
    "dynamics": {"whole": False, "pre_fault": False},
    "trend": {"whole": False},
}
#: relation -> the run-level dynamics change of its proxy (:func:`with_dynamics`)
RELATION_DYNAMICS: dict[str, str] = {
    "trend": "no_learning",
    "dynamics": "volatile",
    "stall": "no_learning",
    "grads": "noisy_grads",
    "collapse": "fast_entropy",
}
#: relations whose proxy has the fault on time, as ``reproduce`` does
_ON_TIME = {"stall": "reproduce", "grads": "reproduce", "collapse": "reproduce"}
#: relations possible when the full run is faulty / healthy
FAULTY_RELATIONS = (
    "reproduce",
    "late",
    "early",
    "miss",
    "wrong",
    "dynamics",
    "stall",
    "grads",
    "collapse",
)
HEALTHY_RELATIONS = ("reproduce", "extra", "trend", "dynamics")


def pruning_level(kept_fraction: float) -> float:
    """Doublings of pruning: 1.0 → 0, 0.5 → 1, 0.125 → 3.

    >>> pruning_level(0.125)
    3.0
    """
    return -math.log2(kept_fraction)


def prune(dyn: Dynamics, *, kept_fraction: float) -> Dynamics:
    """The dynamics of a proxy keeping ``kept_fraction`` of the experts."""
    d = pruning_level(kept_fraction)
    return replace(
        dyn,
        reward_max=dyn.reward_max * (1.0 - 0.07 * d),
        reward0=dyn.reward0 * (1.0 - 0.03 * d),
        tau_reward=dyn.tau_reward * (1.0 + 0.08 * d),
        tau_entropy=dyn.tau_entropy * (1.0 + 0.08 * d),
        tau_length=dyn.tau_length * (1.0 + 0.05 * d),
        entropy0=dyn.entropy0 * (1.0 + 0.03 * d),
        grad0=dyn.grad0 * (1.0 + 0.3 * d),
        grad_sigma=dyn.grad_sigma * (1.0 + 0.15 * d),
        noise=dyn.noise * (1.0 + 0.1 * d),
        step_time_s=dyn.step_time_s * (0.3 + 0.7 * kept_fraction),
        n_gpus=max(8, int(dyn.n_gpus * kept_fraction)),
    )


def with_dynamics(dyn: Dynamics, kind: str) -> Dynamics:
    """Apply a run-level dynamics change: ``normal``, ``no_learning``, ``volatile``,
    ``noisy_grads`` (grad norms 4× larger with 3× their log-scale noise: an optimiser far off
    the full run's) or ``fast_entropy`` (entropy collapsing 5× faster, to a floor 40% lower)."""
    if kind == "no_learning":
        return replace(dyn, reward_max=dyn.reward0 * 1.05, entropy_floor=0.97, length_growth=1.02)
    if kind == "volatile":
        return replace(
            dyn,
            noise=dyn.noise * 3.5,
            grad_sigma=dyn.grad_sigma * 2.0,
            tau_reward=dyn.tau_reward * 2.5,
            tau_entropy=dyn.tau_entropy * 2.5,
        )
    if kind == "noisy_grads":
        return replace(dyn, grad0=dyn.grad0 * 4.0, grad_sigma=dyn.grad_sigma * 3.0)
    if kind == "fast_entropy":
        return replace(
            dyn, tau_entropy=dyn.tau_entropy * 0.2, entropy_floor=dyn.entropy_floor * 0.6
        )
    return dyn


def cost_per_step(kept_fraction: float) -> float:
    """Relative accelerator cost per step (full run = 1.0); 12.5% of experts ≈ 9× cheaper.

    >>> round(cost_per_step(0.125), 3)
    0.113
    """
    cost: float = kept_fraction**1.2 + 0.03
    return round(cost, 4)


def proxy_fault(
    full: FaultSpec | None,
    relation: str,
    *,
    n_steps: int,
    precision: str,
    rng: np.random.Generator,
) -> FaultSpec | None:
    """The fault a proxy shows, given its full run's fault and its relation to it."""
    if relation in ("miss", "trend") or (full is None and relation != "extra"):
        return None
    if full is None:  # extra: a pruning artefact the full run does not have
        variant = "divergence" if rng.random() < 0.5 else _overflow_variant(precision)
        onset = int(n_steps * rng.uniform(0.35, 0.6))
        return FaultSpec(variant, onset, _nan_after(variant, n_steps, rng))
    shift = {
        "reproduce": rng.uniform(-0.02, 0.03),
        "dynamics": rng.uniform(-0.02, 0.03),
        "late": rng.uniform(0.15, 0.25),
        "early": -rng.uniform(0.15, 0.25),
        "wrong": rng.uniform(-0.03, 0.03),
    }[_ON_TIME.get(relation, relation)]  # every draw made, so older corpora stay the same
    onset = int(np.clip(full.onset_step + shift * n_steps, 0.08 * n_steps, 0.85 * n_steps))
    if full.variant in START_VARIANTS and relation != "wrong":
        onset = full.onset_step  # there from the first step in the proxy too
    if relation != "wrong":
        return FaultSpec(full.variant, onset, full.nan_after_steps)
    variant = _wrong_variant(full.variant, precision, rng)
    return FaultSpec(variant, onset, _nan_after(variant, n_steps, rng))


def _overflow_variant(precision: str) -> str:
    return "fp16_scaler_collapse" if precision == "fp16" else "bf16_nonfinite"


def _wrong_variant(variant: str, precision: str, rng: np.random.Generator) -> str:
    label = VARIANT_CLASS[variant]
    if label == "gradient_overflow":
        return "divergence"
    if label == "loss_divergence":
        return _overflow_variant(precision)
    return "divergence" if rng.random() < 0.5 else _overflow_variant(precision)


def _nan_after(variant: str, n_steps: int, rng: np.random.Generator) -> int | None:
    if variant != "divergence" or rng.random() < 0.4:
        return None
    return int(n_steps * rng.uniform(0.12, 0.25))
