"""Compare a full/proxy pair of 1,000,000 points each (50 metrics × 20,000 steps) with its
bootstrap, at the documented analysis resolution (≤ 2,000 points per metric; target ≤ 3 s).

Inputs are generated in memory (a shared smooth trajectory per metric plus AR(1) noise per run,
vectorised with ``scipy.signal.lfilter``). Rows: one full seed (pseudo-seed baseline), three full
seeds (seed-pair baseline), and the same with ``diagnose`` of every run inside the call.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.signal import lfilter

from benchmarks.common import Context, Row, measure
from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run


def make_run(seed: int, *, n_metrics: int, n_steps: int, scale: float = 1.0) -> Run:
    """``n_metrics`` curves of ``n_steps`` (shared shapes, run-specific AR(1) noise)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n_steps)
    shapes = 1 - np.exp(-t[None, :] / np.linspace(0.05, 0.5, n_metrics)[:, None])
    noise = lfilter([np.sqrt(1 - 0.6**2)], [1, -0.6], rng.normal(size=(n_metrics, n_steps)), axis=1)
    values = (shapes * scale + 0.05 * noise).ravel()
    keys = np.repeat([f"metric_{i:02d}" for i in range(n_metrics)], n_steps).tolist()
    steps = np.tile(np.arange(n_steps), n_metrics)
    return build_run(
        raw(steps, keys, values), name=f"bench-{seed}", source=f"mem://bench/{seed}", fmt="bench"
    )


def run(ctx: Context) -> list[Row]:
    from proxydiag.diagnose.api import diagnose
    from proxydiag.fidelity.api import compare

    n_metrics, n_steps = ctx.size(50, 5), ctx.size(20_000, 2_000)
    points = n_metrics * n_steps
    fulls = [make_run(s, n_metrics=n_metrics, n_steps=n_steps) for s in range(3)]
    proxy = make_run(99, n_metrics=n_metrics, n_steps=n_steps, scale=0.8)
    diags = [diagnose(r) for r in [*fulls, proxy]]
    label = f"compare {points:,} + {points:,} points"
    rows = []
    for n_full in (1, 3):

        def call(k: int = n_full) -> object:
            return compare(fulls[:k], proxy, full_diagnoses=diags[:k], proxy_diagnosis=diags[-1])

        cpu = time.process_time()
        seconds = measure(call, repeat=ctx.repeat)
        cpu_each = (time.process_time() - cpu) / (ctx.repeat + 1)
        rows.append(
            Row(
                f"{label}, {n_full} full seed(s), 200 bootstrap resamples",
                "proxydiag",
                seconds,
                points=2 * points,
                note=f"CPU {cpu_each:.2f} s per call",
            )
        )

    def end_to_end() -> object:
        return compare(fulls[:1], proxy)

    rows.append(
        Row(
            f"{label}, 1 full seed, incl. diagnose of both runs",
            "proxydiag",
            measure(end_to_end, repeat=ctx.repeat),
            points=2 * points,
        )
    )
    return rows
