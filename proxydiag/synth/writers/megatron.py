"""Megatron-LM console log: one ``training_log`` iteration line per log interval.

As ``megatron/training/training.py::training_log`` prints it
(docs/formats.md#megatron-lm-and-megatron-deepspeed): timestamp, ``iteration``,
``consumed samples``, ``elapsed time per iteration (ms)`` (the interval's mean), ``learning rate``,
``global batch size``, ``lm loss`` (mean over the interval's applied iterations; omitted when NaN,
as Megatron prints a loss only if ``avg >= 0``), ``loss scale``, ``grad norm`` (omitted on a skipped
fp16 iteration, where Megatron has none; ``nan``/``inf`` when non-finite), and the interval's counts
of skipped and NaN iterations. bf16 runs print ``loss scale: 1.0``.

The console log carries no RL metrics: the loss it prints is the token NLL of the sampled
responses (:mod:`proxydiag.synth.model`), and no rollout mismatch, so precision faults are
not generated in this format.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from proxydiag.synth.sim import SynthRun
from proxydiag.synth.view import interval_sum, logged_steps

PREAMBLE = (
    "using world size: 64, data-parallel size: 8, tensor-model-parallel size: 4, "
    "pipeline-model-parallel size: 2",
    "> building GPTMoE model ...",
    "[after dataloaders are built] datetime: {start}",
    "done with setup ...",
    "training ...",
)


def _interval_mean(values: np.ndarray, mask: np.ndarray, *, log_interval: int) -> np.ndarray:
    n = len(values) // log_interval * log_interval
    v = np.where(mask, values, 0.0)[:n].reshape(-1, log_interval)
    count = mask[:n].reshape(-1, log_interval).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, v.sum(axis=1) / np.maximum(count, 1), np.nan)


def _stamp(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%d %H:%M:%S")


def iteration_lines(sr: SynthRun, *, log_interval: int) -> list[str]:
    """The iteration lines of ``sr`` logged every ``log_interval`` iterations."""
    v, n, k = sr.values, sr.n_steps, log_interval
    steps = logged_steps(n, log_interval=k)
    idx = steps - 1
    skipped = v["skipped"] > 0
    fp16 = sr.scenario.precision == "fp16"
    loss = _interval_mean(v["loss"], ~skipped, log_interval=k)
    elapsed = interval_sum(v["step_time"], log_interval=k) / k * 1000.0
    skips = interval_sum(v["skipped"], log_interval=k).astype(int)
    nans = interval_sum(v["nonfinite"], log_interval=k).astype(int)
    scale = v["loss_scale"][idx] if fp16 else np.ones(len(idx))
    overflow = skipped & (v["nonfinite"] == 0)
    batch = int(v["samples"][0])
    lines = []
    for j, step in enumerate(steps.tolist()):
        parts = [
            f" [{_stamp(float(sr.wall_time[step - 1]))}] iteration {step:8d}/{n:8d}",
            f"consumed samples: {int(v['samples'][step - 1]):12d}",
            f"elapsed time per iteration (ms): {elapsed[j]:.1f}",
            f"learning rate: {v['lr'][step - 1]:.6E}",
            f"global batch size: {batch:5d}",
        ]
        if loss[j] >= 0.0:  # Megatron's own test: NaN never passes it
            parts.append(f"lm loss: {loss[j]:.6E}")
        parts.append(f"loss scale: {scale[j]:.1f}")
        if not overflow[step - 1]:
            parts.append(f"grad norm: {v['grad_norm'][step - 1]:.3f}")
        parts.append(f"number of skipped iterations: {skips[j]:3d}")
        parts.append(f"number of nan iterations: {nans[j]:3d}")
        lines.append(" | ".join(parts) + " |")
    return lines


def write(run_dir: Path, sr: SynthRun, *, naming: str, log_interval: int) -> Path:
    """Write ``train.log`` in ``run_dir``; ``naming`` must be ``megatron``."""
    path = run_dir / "train.log"
    start = _stamp(float(sr.wall_time[0]))
    head = [line.format(start=start) for line in PREAMBLE]
    path.write_text("\n".join([*head, *iteration_lines(sr, log_interval=log_interval)]) + "\n")
    return path
