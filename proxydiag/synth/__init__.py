"""Sample runs with ground truth: a generator of full/proxy GRPO/PPO runs of an MoE policy.

>>> from proxydiag.synth import simulate
>>> sr = simulate("divergence", seed=1)
>>> sr.truth.label, sr.run.has("grad_norm")
('loss_divergence', True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proxydiag.synth.scenario import SCENARIOS, VARIANT_CLASS, FaultSpec, Scenario, Truth, named

if TYPE_CHECKING:
    from pathlib import Path

    from proxydiag.synth.sim import SynthRun, simulate

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


def __getattr__(name: str) -> Any:
    # the simulator pulls in scipy.signal (~0.6 s): import it only when it is used, so the
    # CLI, which imports the scenario list for --help, starts fast
    if name in ("SynthRun", "simulate"):
        import importlib

        return getattr(importlib.import_module("proxydiag.synth.sim"), name)
    raise AttributeError(name)
