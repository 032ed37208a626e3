"""Live alerts of the new precision kinds: a gradient norm that moves onto the bf16 grid
raises lost master weights a few logged points later (no level moves, so a trigger of its own
looks); healthy routing counters with skipped micro-batches now and then raise nothing."""

from __future__ import annotations

import numpy as np
import pytest

from proxydiag.frame import raw
from proxydiag.run.build import build_run
from proxydiag.watch.replay import replay
from tests.diagnose.test_master_weights import to_bf16, to_fp32


def _run(data: dict[str, np.ndarray], every: int):
    n = len(next(iter(data.values())))
    steps = np.arange(1, n + 1) * every
    keys = [k for k in data for _ in range(n)]
    frame = raw(np.tile(steps, len(data)), keys, np.concatenate(list(data.values())))
    return build_run(frame, name="w", source="mem://w", fmt="test", attrs={})


@pytest.mark.parametrize(("every", "lost_at"), [(1, 300), (10, 25), (5, 70)])
def test_master_weights_lost_is_raised_live(every: int, lost_at: int) -> None:
    rng = np.random.default_rng(every)
    n = 2 * lost_at
    g = 0.8 * np.exp(rng.normal(0, 0.15, n))
    i = np.arange(n)
    grad = np.where(i < lost_at, to_fp32(g), to_bf16(g))
    result = replay(_run({"grad_norm": grad, "loss": 2 - i / 1e4}, every), every=1)
    alerts = [a for a in result.alerts if a.label == "precision_fault"]
    assert alerts, [a.to_dict() for a in result.alerts]
    onset = (lost_at + 1) * every
    assert alerts[0].onset_step == onset
    # the detector needs 10 points on the grid (and 5% of those held); the trigger re-fits
    # while they come, the levels being looked at every 10 steps
    assert alerts[0].raised_at_step <= onset + max(12 * every, 30)


@pytest.mark.parametrize("seed", range(3))
def test_healthy_routing_counters_and_norms_raise_nothing_live(seed: int) -> None:
    rng = np.random.default_rng(50 + seed)
    n = 300
    skip = np.where(rng.random(n) < 0.05, rng.uniform(0.002, 0.02, n), 0.0)
    data = {
        "r3/skip_fraction_active": skip,
        "r3/replay_fraction_active": 1.0 - skip,
        "train/router/compare_current_set_change_fraction": 0.004 * np.exp(rng.normal(0, 0.2, n)),
        "grad_norm": to_fp32(0.8 * np.exp(rng.normal(0, 0.15, n))),
        "loss": 2 - np.arange(n) / 1e4,
    }
    result = replay(_run(data, 5), every=1)
    assert [a.to_dict() for a in result.alerts] == []
    assert result.final.label == "healthy"
