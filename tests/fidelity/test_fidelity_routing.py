"""Routing in ``compare``: a proxy that keeps no more experts than its top-k has no routing (its
router metrics are left out, and the comparison says so); routing-consistency shares are
compared like the loss curves when both runs log them."""

from __future__ import annotations

import json
import warnings

import jsonschema
import numpy as np
import pytest
from _fidelity_runs import compare_healthy, curves

from proxydiag.fidelity._routing import is_routing, no_routing
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.frame import raw
from proxydiag.ingest import read_run
from proxydiag.run import Run
from proxydiag.run.build import build_run
from tests._paths import SCHEMAS, TESTS

CFG = FidelityConfig(n_boot=40)
N = 240


def _run(name: str, seed: int, attrs: dict[str, object], *, aux: float, change: float) -> Run:
    data = curves(N, seed=seed)
    rng = np.random.default_rng(seed + 1000)
    data["moe/load_balancing_loss"] = aux * np.exp(rng.normal(0, 0.03, N))
    data["moe/load_balancing_loss_layer_0"] = aux * np.exp(rng.normal(0, 0.03, N))
    data["train/router/compare_current_set_change_fraction"] = change * np.exp(
        rng.normal(0, 0.1, N)
    )
    steps = np.arange(N)
    keys = [k for k in data for _ in range(N)]
    frame = raw(np.tile(steps, len(data)), keys, np.concatenate(list(data.values())))
    return build_run(frame, name=name, source=f"mem://{name}", fmt="test", attrs=attrs)


def _fulls() -> list[Run]:
    attrs = {"role": "full", "experts_kept": 8, "params": {"num_experts_per_tok": 2}}
    return [_run(f"f{s}", s, attrs, aux=1.02, change=0.004) for s in range(3)]


@pytest.mark.parametrize(
    "attrs",
    [
        {"experts_kept": 2, "params": {"model.num_experts_per_tok": "2"}},  # HF config params
        {"experts_kept": 4, "params": {"moe_router_topk": 4}},  # Megatron-LM args
        {"experts_kept": 2, "extra": {"top_k": 2}},  # a sidecar's field
    ],
)
def test_a_proxy_without_routing_is_said_so_and_its_router_metrics_not_scored(
    attrs: dict[str, object],
) -> None:
    # a router over k experts with top-k = k: the load-balancing loss sits at its floor, the
    # set-change share at 0 — far from the full run's, and meaningless
    proxy = _run("p", 9, {"role": "proxy", **attrs}, aux=1.0, change=0.0)
    c = compare_healthy(_fulls(), proxy, config=CFG)
    out = c.to_dict()
    jsonschema.validate(out, json.loads((SCHEMAS / "comparison.schema.json").read_text()))
    routing = {m for m in out["metrics"] if is_routing(m)}
    assert not routing, routing
    note = [r for r in c.reasons if "no routing" in r]
    assert note and "router_aux_loss" in note[0] and "mismatch_route_change" in note[0]
    skipped = out["events"]["skipped_metrics"]
    # the per-layer load-balancing loss is folded into the run-level one, itself not scored
    assert {"router_aux_loss", "mismatch_route_change", "router_aux_loss_layer_*"} <= set(skipped)
    assert "reward" in out["metrics"]


def test_a_routed_proxy_has_its_routing_consistency_compared_like_the_loss() -> None:
    attrs = {"role": "proxy", "experts_kept": 4, "params": {"num_experts_per_tok": 2}}
    same = _run("p", 9, attrs, aux=1.02, change=0.004)
    drifted = _run("q", 9, attrs, aux=1.02, change=0.04)
    assert no_routing(same) is None
    kept = compare_healthy(_fulls(), same, config=CFG)
    assert "mismatch_route_change" in kept.metrics
    assert "mismatch_route_change" in CFG.key_metrics  # weighed like the loss curves
    assert kept.metrics["mismatch_route_change"].verdict == "faithful"
    moved = compare_healthy(_fulls(), drifted, config=CFG)
    assert moved.metrics["mismatch_route_change"].verdict != "faithful"
    assert moved.fidelity < kept.fidelity


def test_unknown_top_k_or_experts_leaves_routing_scored() -> None:
    proxy = _run("p", 9, {"role": "proxy", "experts_kept": 2}, aux=1.0, change=0.0)
    assert no_routing(proxy) is None
    assert no_routing(_run("p", 9, {"params": {"top_k": 50}}, aux=1.0, change=0.0)) is None


def test_the_real_two_expert_top_2_proxy_has_no_routing() -> None:
    real = TESTS / "data" / "real"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = read_run(real / "grpo-healthy-e8" / "mlflow.db")
        two = read_run(real / "grpo-healthy-e2" / "mlruns")
        four = read_run(real / "grpo-healthy-e4" / "mlruns")
    assert no_routing(two) is not None and no_routing(four) is None
    c = compare_healthy([full], two, config=CFG)
    assert "router_aux_loss" not in c.metrics
    assert any("top-k 2" in r and "no routing" in r for r in c.reasons)
    assert "router_aux_loss" in compare_healthy([full], four, config=CFG).metrics
