"""MoE runs that log their router per layer, in the shape Megatron-Core writes them.

With ``--moe-per-layer-logging`` Megatron-Core's MoE tracker writes, every logged iteration,
the run-level value of each tracked router loss under its bare name (``load_balancing_loss``,
``z_loss``: the sum over layers divided by the number of MoE layers) and one value per
transformer layer under ``moe/<name>_layer_<i>`` (``i`` 0-based over *all* layers: a dense
layer, e.g. the first of a ``moe_layer_freq`` pattern, logs 0). NeMo-RL's Megatron backend
logs the same dict under ``train/moe/<name>`` and ``train/moe/moe/<name>_layer_<i>``.

Written fresh here: levels differ from layer to layer, the load-balancing loss starts high and
decays as the router settles, the z-loss drifts a little; a fault is one layer's router
(``rise``: its load-balancing loss or z-loss climbing from ``onset``; ``nonfinite``: its z-loss
turning inf/NaN at some steps from ``onset``) or every layer's (``all``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter

Series = dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Moe:
    n_steps: int = 300
    every: int = 2
    layers: int = 12
    dense: tuple[int, ...] = (0,)
    fault: str = ""  # "", "rise", "nonfinite", "all"
    metric: str = "load_balancing_loss"  # the faulty family
    layer: int = 7
    onset: int = 300
    fold: float = 3.5
    naming: str = "megatron"  # or "nemo_rl"
    run_level: bool = True  # log the run-level values too


def series(moe: Moe, seed: int) -> Series:
    """Every key of the run: ``lm loss``, ``grad-norm``, the router losses run-level and per
    layer, as ``{key: (steps, values)}``."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, moe.n_steps + 1) * moe.every
    n = steps.size
    t = steps / steps[-1]
    per_layer: dict[str, np.ndarray] = {}
    for name in ("load_balancing_loss", "z_loss"):
        rows = np.zeros((moe.layers, n))
        for i in range(moe.layers):
            if i in moe.dense:
                continue
            level = np.exp(rng.uniform(-0.3, 0.6)) * (1.0 if name == "load_balancing_loss" else 4.0)
            if name == "load_balancing_loss":  # high at first, decays as the router settles
                shape = 1 + rng.uniform(0.5, 2.5) * np.exp(-steps / rng.uniform(20, 120))
            else:  # logits grow a little: a slow drift
                shape = 1 + rng.uniform(-0.15, 0.3) * t
            noise = rng.normal(0, 0.06 if name == "load_balancing_loss" else 0.12, n)
            rows[i] = level * shape * np.exp(noise)
            hit = name == moe.metric and (moe.fault == "all" or i == moe.layer)
            if hit and moe.fault in ("rise", "all"):
                ramp = np.clip((steps - moe.onset) / (0.15 * steps[-1]), 0, 1)
                rows[i] *= np.exp(np.log(moe.fold) * ramp)
            elif hit and moe.fault == "nonfinite":
                bad = (steps >= moe.onset) & (rng.random(n) < 0.3)
                bad[min(int(np.searchsorted(steps, moe.onset)), n - 1)] = True
                rows[i] = np.where(bad, rng.choice([np.inf, np.nan], n), rows[i])
        per_layer[name] = rows
    out: Series = {
        "lm loss": (steps, 1.2 + 0.8 * np.exp(-steps / 150) + rng.normal(0, 0.02, n)),
        "grad-norm": (steps, np.exp(rng.normal(np.log(0.4), 0.1, n))),
    }
    moe_layers = moe.layers - len(moe.dense)
    for name, rows in per_layer.items():
        prefix = "moe/" if moe.naming == "megatron" else "train/moe/moe/"
        for i in range(moe.layers):
            out[f"{prefix}{name}_layer_{i}"] = (steps, rows[i])
        if moe.run_level:  # Megatron's own mean: sum over layers / MoE layers (NaN spreads)
            key = name if moe.naming == "megatron" else f"train/moe/{name}"
            out[key] = (steps, rows.sum(axis=0) / moe_layers)
    return out


def write(path: Path, data: Series, fmt: str) -> Path:
    """``data`` as a TensorBoard event file (tensorboardX's writer, as Megatron's torch
    ``SummaryWriter`` writes it), JSONL (one record per step) or a wide CSV."""
    if fmt == "tensorboard":
        # tensorboardX logs a line per NaN/inf it writes: they are the point here
        logging.getLogger("tensorboardX.x2num").setLevel(logging.ERROR)
        path.mkdir(parents=True, exist_ok=True)
        writer = SummaryWriter(str(path))
        steps = next(iter(data.values()))[0]
        for j, step in enumerate(steps):
            for key, (_, values) in data.items():
                writer.add_scalar(key, float(values[j]), int(step))
        writer.close()
        return next(path.glob("events.out.tfevents.*"))
    keys = list(data)
    steps = data[keys[0]][0]
    if fmt == "jsonl":
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            json.dumps({"step": int(s), **{k: float(data[k][1][j]) for k in keys}})
            for j, s in enumerate(steps)
        ]
        path.write_text("\n".join(lines) + "\n")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ",".join(["step", *keys])
    rows = [
        ",".join([str(int(s)), *(repr(float(data[k][1][j])) for k in keys)])
        for j, s in enumerate(steps)
    ]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path
