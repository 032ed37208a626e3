"""Per-layer router metrics in ``watch``: held like any declared metric, named in the final
diagnosis when one layer's router goes bad, and never an alert on their own (a healthy run's
per-layer noise, or one layer's router, does not stop a run)."""

from __future__ import annotations

import numpy as np
import pytest

from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.watch.replay import replay
from tests._moe_layers import Moe, series


def _run(moe: Moe, seed: int) -> Run:
    data = series(moe, seed)
    steps = np.concatenate([s for s, _ in data.values()])
    keys = [k for k, (s, _) in data.items() for _ in range(s.size)]
    values = np.concatenate([v for _, v in data.values()])
    return build_run(raw(steps, keys, values), name="moe", source="mem://moe", fmt="test")


@pytest.mark.parametrize("seed", range(3))
def test_healthy_per_layer_routers_raise_no_alert(seed: int) -> None:
    moe = Moe(layers=(12, 24, 16)[seed], naming=("megatron", "nemo_rl")[seed % 2])
    result = replay(_run(moe, 300 + seed), every=10)
    assert result.alerts == ()
    assert result.final.label == "healthy"
    assert not [e for e in result.final.events if e.kind.startswith("router_")]


@pytest.mark.parametrize(
    ("fault", "metric", "kind"),
    [
        ("rise", "load_balancing_loss", "router_loss_jump"),
        ("nonfinite", "z_loss", "router_nonfinite"),
    ],
)
def test_one_bad_layer_is_named_at_the_end_and_stops_nothing(
    fault: str, metric: str, kind: str
) -> None:
    moe = Moe(fault=fault, metric=metric, layer=8, onset=240)
    result = replay(_run(moe, 17), every=10)
    assert result.alerts == ()  # evidence, not a label: the loss and the gradient are fine
    found = [e for e in result.final.events if e.kind == kind]
    assert len(found) == 1 and found[0].metric is not None
    assert found[0].metric.endswith("_layer_8") and "layer 8's" in found[0].evidence
