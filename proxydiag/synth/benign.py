"""Benign patterns every run carries: isolated spikes that revert.

(The fp16 calibration burst and the periodic growth-probe overflows come from the loss
scaler itself, :mod:`proxydiag.synth.loss_scaler`; the warm-up transients of grad norm and
entropy from :mod:`proxydiag.synth.model`.)
"""

from __future__ import annotations

import numpy as np

from proxydiag.synth.effects import Effects, since


def add_spikes(
    eff: Effects, rng: np.random.Generator, *, quiet_from_step: int | None = None
) -> list[int]:
    """Add isolated grad-norm/loss spikes that decay within a few steps; return their steps.

    About one spike per 250 steps, between 10% and 95% of the run, none from
    ``quiet_from_step - 40`` on (so a spike never masks a fault's onset). A spike raises the
    grad norm 3–12× (BLOOM 176B: 0.24 → 960 and back within ~30 iterations) and, in fp16,
    lowers the headroom with it, so it may cause one benign overflow.

    >>> eff = Effects.neutral(1000)
    >>> steps = add_spikes(eff, np.random.default_rng(1))
    >>> len(steps) > 0 and all(eff.grad_log[s - 1] > 1.0 for s in steps)
    True
    """
    n = len(eff.grad_log)
    hi = n * 0.95 if quiet_from_step is None else min(n * 0.95, quiet_from_step - 40)
    lo = n * 0.1
    count = int(rng.poisson(n / 250.0))
    if hi <= lo or count == 0:
        return []
    steps = sorted(int(s) for s in rng.uniform(lo, hi, size=count))
    for step in steps:
        dt = since(n, step)
        shape = np.where(dt >= 0, np.exp(-np.maximum(dt, 0.0) / rng.uniform(1.5, 4.0)), 0.0)
        eff.grad_log += np.log(rng.uniform(3.0, 12.0)) * shape
        eff.loss_spike += 4.0 * shape
    return steps
