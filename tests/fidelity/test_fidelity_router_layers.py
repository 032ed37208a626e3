"""Per-layer router metrics in ``compare``: a family of ``<metric>_layer_<i>`` is compared as its
run-level metric (the run's own, else the mean over its routed layers), never scored layer by
layer as so many diverged metrics."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
from _fidelity_runs import compare_healthy

from proxydiag.fidelity.config import FidelityConfig
from proxydiag.frame import raw
from proxydiag.metrics import layer_of
from proxydiag.run import Run
from proxydiag.run.build import build_run
from tests._moe_layers import Moe, series
from tests._paths import SCHEMAS

CFG = FidelityConfig(n_boot=40)
ATTRS = {"params": {"num_experts_per_tok": 2}}


def _run(name: str, moe: Moe, seed: int, role: str, *, keep=lambda key: True) -> Run:  # type: ignore[no-untyped-def]
    data = {k: v for k, v in series(moe, seed).items() if keep(k)}
    steps = np.concatenate([s for s, _ in data.values()])
    keys = [k for k, (s, _) in data.items() for _ in range(s.size)]
    values = np.concatenate([v for _, v in data.values()])
    attrs = {**ATTRS, "role": role, "experts_kept": 8 if role == "full" else 4}
    return build_run(
        raw(steps, keys, values), name=name, source=f"mem://{name}", fmt="test", attrs=attrs
    )


def _schema_valid(out: dict[str, object]) -> None:
    jsonschema.validate(out, json.loads((SCHEMAS / "comparison.schema.json").read_text()))


def test_per_layer_families_are_compared_as_their_run_level_metric() -> None:
    fulls = [_run(f"f{s}", Moe(layers=16), s, "full") for s in range(3)]
    proxy = _run("p", Moe(layers=16), 9, "proxy")
    assert sum(layer_of(m) is not None for m in proxy.metrics) == 32
    c = compare_healthy(fulls, proxy, config=CFG)
    out = c.to_dict()
    _schema_valid(out)
    assert not [m for m in out["metrics"] if layer_of(m) is not None]
    assert {"router_aux_loss", "router_z_loss"} <= set(out["metrics"])
    note = [r for r in c.reasons if r.startswith("per-layer metrics compared as")]
    assert note and "router_aux_loss (16 layers in the full runs, 16 in the proxy)" in note[0]
    skipped = out["events"]["skipped_metrics"]
    assert skipped["router_z_loss_layer_*"].startswith("compared as router_z_loss")


def test_a_run_logging_only_layers_compares_with_one_logging_only_the_mean() -> None:
    def only_run_level(key: str) -> bool:
        return "_layer_" not in key

    fulls = [_run(f"f{s}", Moe(), s, "full", keep=only_run_level) for s in range(3)]
    proxy = _run("p", Moe(run_level=False), 9, "proxy")
    assert "router_aux_loss" not in proxy.metrics
    c = compare_healthy(fulls, proxy, config=CFG)
    _schema_valid(c.to_dict())
    # the proxy's mean over its 11 routed layers (the dense layer 0 left out) is the full
    # runs' own run-level value, same generator: faithful
    assert c.metrics["router_aux_loss"].verdict == "faithful"
    assert c.metrics["router_z_loss"].verdict == "faithful"


def test_one_bad_layer_is_not_a_row_of_diverged_metrics() -> None:
    fulls = [_run(f"f{s}", Moe(), s, "full") for s in range(3)]
    healthy = compare_healthy(fulls, _run("p", Moe(), 9, "proxy"), config=CFG)
    bad = compare_healthy(
        fulls, _run("q", Moe(fault="rise", layer=5, onset=200, fold=6.0), 9, "proxy"), config=CFG
    )
    # one entry per family whatever the layer count; the bad layer moves the mean only
    assert set(bad.metrics) == set(healthy.metrics)
    assert bad.metrics["router_aux_loss"].score <= healthy.metrics["router_aux_loss"].score
