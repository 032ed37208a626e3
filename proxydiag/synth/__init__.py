"""Sample runs with ground truth: a generator of full/proxy GRPO/PPO runs of an MoE policy.

>>> from proxydiag.synth import simulate
>>> sr = simulate("divergence", seed=1)
>>> sr.truth.label, sr.run.has("grad_norm")
('loss_divergence', True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proxydiag.synth.scenario import SCENARIOS, VARIANT_CLASS, FaultSpec, Scenario, Truth, named
from proxydiag.synth.sim import SynthRun, simulate

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "SCENARIOS",
    "VARIANT_CLASS",
    "FaultSpec",
    "Scenario",
    "SynthRun",
    "Truth",
    "named",
    "simulate",
    "write_corpus",
    "write_sample_runs",
]


def write_corpus(out_dir: str | Path, **kwargs: Any) -> Path:
    """Write a labelled corpus (see :func:`proxydiag.synth.corpus.write_corpus`)."""
    from proxydiag.synth.corpus import write_corpus as _write

    return _write(out_dir, **kwargs)


def write_sample_runs(out_dir: str | Path) -> Path:
    """Write the checked-in ``sample_runs/`` (see :mod:`proxydiag.synth.samples`)."""
    from proxydiag.synth.samples import write_sample_runs as _write

    return _write(out_dir)
