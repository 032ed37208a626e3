"""Diagnose a 1,000,000-point run (50 metrics × 20,000 steps; target ≤ 1 s).

The run is a generated GRPO run (:func:`proxydiag.synth.simulate`: every canonical metric a
real stack logs, with a fault or healthy) padded to 50 metrics with extra logged keys, as real
runs carry many metrics the detectors do not read. Event detection uses every point; change
points of long series are located on ≤ 2,000 bucket medians (the documented resolution).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from benchmarks.common import Context, Row, measure
from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run


def make_run(scenario: str, *, n_steps: int, n_metrics: int, seed: int = 0) -> Run:
    """A simulated run of ``n_steps`` with exactly ``n_metrics`` metrics."""
    from proxydiag.synth import named, simulate

    sc = named(scenario, n_steps=n_steps)
    sc = replace(sc, precision="fp16") if scenario != "bf16_nonfinite" else sc
    values = dict(simulate(sc, seed=seed).values)
    names = sorted(values)[:n_metrics]
    rng = np.random.default_rng(seed)
    extra = [f"extra/metric_{i:02d}" for i in range(n_metrics - len(names))]
    columns = [values[k] for k in names] + [rng.normal(size=n_steps) for _ in extra]
    keys = np.repeat(np.array(names + extra, dtype=object), n_steps)
    steps = np.tile(np.arange(1, n_steps + 1), n_metrics)
    return build_run(
        raw(steps, keys, np.concatenate(columns)),
        name=f"bench-{scenario}",
        source=f"mem://bench/{scenario}",
        fmt="bench",
    )


def run(ctx: Context) -> list[Row]:
    from proxydiag.diagnose.api import diagnose

    n_metrics, n_steps = ctx.size(50, 10), ctx.size(20_000, 2_000)
    points = n_metrics * n_steps
    rows = []
    for scenario in ("climb_then_divergence", "healthy"):
        r = make_run(scenario, n_steps=n_steps, n_metrics=n_metrics)
        result = diagnose(r)
        cpu = time.process_time()
        seconds = measure(lambda r=r: diagnose(r), repeat=ctx.repeat)  # type: ignore[misc]
        cpu_each = (time.process_time() - cpu) / (ctx.repeat + 1)
        rows.append(
            Row(
                f"diagnose {points:,} points ({n_metrics} metrics × {n_steps:,} steps), {scenario}",
                "proxydiag",
                seconds,
                points=points,
                note=f"label {result.label}@{result.onset_step}; CPU {cpu_each:.2f} s per call",
            )
        )
    return rows
