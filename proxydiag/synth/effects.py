"""`Effects`: per-step modifiers that faults and benign patterns apply to the base dynamics.

Faults and benign patterns never write metrics themselves; they add to these arrays and
:mod:`proxydiag.synth.model` turns the sum into metrics, so every symptom stays coherent
(e.g. a skipped step does not advance learning, whatever skipped it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Effects:
    """Per-step modifiers (index ``i`` is step ``i + 1``)."""

    #: added to log(grad norm) (natural log)
    grad_log: np.ndarray
    #: subtracted from the fp16 headroom (log2 of the largest scale that does not overflow)
    headroom_drop: np.ndarray
    #: steps whose gradients are non-finite in bf16 (NaN/inf grad norm, step skipped)
    nonfinite: np.ndarray
    #: multiplies the rollout-vs-learner mismatch (1 = healthy)
    mismatch_mult: np.ndarray
    #: divergence severity in [0, 1]: reward/entropy collapse, KL and clip blow-up
    collapse: np.ndarray
    #: slow-drift severity in [0, 1]
    drift: np.ndarray
    #: steps from which the weights are NaN (everything the learner computes is NaN)
    nan: np.ndarray
    #: multiplies the learning progress per applied step (1 = healthy)
    learn_gain: np.ndarray
    #: extra scale of the policy-loss noise (0 = none)
    loss_spike: np.ndarray
    #: share of token routes not replayed from the rollout (0 = routing replay on)
    route_off: np.ndarray
    #: multiplies the share of tokens whose top-k experts differ between the routers
    route_change_mult: np.ndarray
    #: steps whose grad norm is reduced in bf16 (the fp32 master weights lost)
    grad_bf16: np.ndarray
    #: in a divergence, entropy explodes (True) or collapses (False)
    entropy_explodes: bool = False
    #: the collapse leaves the losses alone (an RL policy collapse without a loss spike)
    quiet_loss: bool = False

    @classmethod
    def neutral(cls, n_steps: int) -> Effects:
        """No fault, no benign pattern.

        >>> Effects.neutral(3).mismatch_mult.tolist()
        [1.0, 1.0, 1.0]
        """
        zeros = np.zeros(n_steps)
        return cls(
            grad_log=zeros.copy(),
            headroom_drop=zeros.copy(),
            nonfinite=np.zeros(n_steps, dtype=bool),
            mismatch_mult=np.ones(n_steps),
            collapse=zeros.copy(),
            drift=zeros.copy(),
            nan=np.zeros(n_steps, dtype=bool),
            learn_gain=np.ones(n_steps),
            loss_spike=zeros.copy(),
            route_off=zeros.copy(),
            route_change_mult=np.ones(n_steps),
            grad_bf16=np.zeros(n_steps, dtype=bool),
        )


def since(n_steps: int, onset_step: int) -> np.ndarray:
    """Steps elapsed since ``onset_step`` (0 at the onset, negative before it).

    >>> since(5, 3).tolist()
    [-2.0, -1.0, 0.0, 1.0, 2.0]
    """
    return np.arange(1, n_steps + 1, dtype=np.float64) - onset_step
