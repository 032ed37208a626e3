"""Quick synthetic full/proxy runs for the fidelity tests: shared smooth trajectories plus AR(1)
noise per seed (independent of proxydiag.synth, so the tests run before it exists)."""

from __future__ import annotations

from typing import Any

import numpy as np
from _noise import ar1

from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity.api import compare
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.result import Comparison
from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run


def curves(
    n: int,
    *,
    seed: int,
    ceiling: float = 0.8,
    tau: float = 0.25,
    noise: float = 1.0,
    learns: bool = True,
    reward_dir: float = 1.0,
) -> dict[str, np.ndarray]:
    """The metrics of one run of ``n`` steps."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)
    rise = (1 - np.exp(-t / tau)) if learns else np.zeros(n)
    return {
        "reward": 0.2 + reward_dir * (ceiling - 0.2) * rise + ar1(rng, n, sigma=0.03 * noise),
        "entropy": 0.4 + 1.2 * np.exp(-t / (tau * 1.5)) + ar1(rng, n, sigma=0.03 * noise),
        "grad_norm": np.exp(np.log(0.8) - 0.5 * t + ar1(rng, n, phi=0.3, sigma=0.15 * noise)),
        "kl": 0.002 + 0.02 * t + ar1(rng, n, sigma=0.001 * noise),
        "pg_loss": ar1(rng, n, phi=0.2, sigma=0.02 * noise),
    }


def make_run(
    name: str, data: dict[str, np.ndarray], *, steps: np.ndarray | None = None, role: str = "full"
) -> Run:
    """A canonical Run from columns (NaN/inf kept as logged values)."""
    n = len(next(iter(data.values())))
    steps = np.arange(n) if steps is None else steps
    keys, values, all_steps = [], [], []
    for key, vals in data.items():
        keys += [key] * n
        values.append(vals)
        all_steps.append(steps)
    frame = raw(np.concatenate(all_steps), keys, np.concatenate(values))
    return build_run(frame, name=name, source=f"mem://{name}", fmt="test", attrs={"role": role})


def diag(run: Run, label: str = "healthy", onset: int | None = None) -> Diagnosis:
    """A Diagnosis with a given label (the verdict tests do not depend on the detectors)."""
    return Diagnosis(
        source="test",
        run=run.id,
        label=label,
        onset_step=onset,
        confidence=1.0,
        root_cause=None,
        first_step=run.first_step,
        last_step=run.last_step,
    )


def compare_healthy(
    full: list[Run], proxy: Run, *, config: FidelityConfig, **kw: Any
) -> Comparison:
    """:func:`compare` with every run diagnosed healthy (:func:`diag`): the fidelity tests alone."""
    return compare(
        full,
        proxy,
        config=config,
        full_diagnoses=[diag(f) for f in full],
        proxy_diagnosis=diag(proxy),
        **kw,
    )
