"""Per-layer MoE router metrics: Megatron-Core's ``moe/<name>_layer_<i>`` (and other per-layer
spellings) read as a layer-indexed family of the canonical router metrics, one layer's router
going bad named with its layer, healthy per-layer noise left alone, NaN/inf kept."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import router
from proxydiag.diagnose.view import from_arrays
from proxydiag.errors import ConfigError
from proxydiag.ingest import read_run
from proxydiag.metrics import AliasTable, layer_families, layer_of
from proxydiag.run import Run
from tests._moe_layers import Moe, series, write
from tests._paths import SCHEMAS

PER_LAYER = {
    # Megatron-Core MoE tracker, --moe-per-layer-logging (TensorBoard / W&B)
    "moe/load_balancing_loss_layer_3": "router_aux_loss_layer_3",
    "moe/seq_load_balancing_loss_layer_0": "router_aux_loss_layer_0",
    "moe/global_load_balancing_loss_layer_11": "router_aux_loss_layer_11",
    "moe/z_loss_layer_27": "router_z_loss_layer_27",
    # NeMo-RL's Megatron backend: the tracker's dict under train/moe/
    "train/moe/moe/load_balancing_loss_layer_5": "router_aux_loss_layer_5",
    "train/moe/moe/z_loss_layer_5": "router_z_loss_layer_5",
    # a layer namespace before the name, or a module path
    "router/layer_2/load_balancing_loss": "router_aux_loss_layer_2",
    "moe/layer4/router_entropy": "router_entropy_layer_4",
    "model.layers.11.mlp.gate.aux_loss": "router_aux_loss_layer_11",
    "decoder.layers.3.mlp.router.expert_load_max": "expert_load_max_layer_3",
}
STAY_RAW = [
    "critic/loss_layer_3",  # not a router metric: no per-layer family
    "grad_norm_layer_3",
    "mtp_1_loss",  # Megatron's multi-token prediction losses are per MTP layer, not routers
    "moe/expert_5_usage",  # an expert index, not a layer
    "moe/load_balancing_loss_layer_3x",
]
RUN_LEVEL = {
    "load_balancing_loss": "router_aux_loss",  # Megatron's run-level tag (mean over MoE layers)
    "z_loss": "router_z_loss",
    "train/moe/load_balancing_loss": "router_aux_loss",  # NeMo-RL
    "seq_load_balancing_loss": "router_aux_loss",
    "moe/global_load_balancing_loss": "router_aux_loss",
}


@pytest.mark.parametrize("key", sorted(PER_LAYER))
def test_a_per_layer_spelling_is_its_canonical_metric_with_the_layer(key: str) -> None:
    got = AliasTable.default().resolve([key])[key]
    assert got == PER_LAYER[key]
    base, layer = layer_of(got) or ("", -1)
    assert base in AliasTable.default().specs and str(layer) in key


@pytest.mark.parametrize("key", STAY_RAW)
def test_what_is_no_router_layer_stays_raw(key: str) -> None:
    assert AliasTable.default().resolve([key])[key] == key


@pytest.mark.parametrize("key", sorted(RUN_LEVEL))
def test_the_run_level_router_losses_map_as_before(key: str) -> None:
    assert AliasTable.default().resolve([key])[key] == RUN_LEVEL[key]


def test_one_spelling_per_family_the_best_ranked() -> None:
    # a run logging two load-balancing losses per layer (micro-batch and global-batch): the
    # first-ranked spelling is the family for every layer, the other keeps its raw names
    keys = [
        f"moe/{n}_layer_{i}"
        for n in ("global_load_balancing_loss", "load_balancing_loss")
        for i in range(3)
    ]
    got = AliasTable.default().resolve(keys)
    assert {k: v for k, v in got.items() if v != k} == {
        f"moe/load_balancing_loss_layer_{i}": f"router_aux_loss_layer_{i}" for i in range(3)
    }


def test_a_users_layer_pattern_and_a_bad_one(tmp_path: Path) -> None:
    good = tmp_path / "aliases.toml"
    good.write_text(
        "[layers]\npatterns = ['^blk(?P<layer>\\d+):(?P<post>.+)$']\n"
        '[metrics.router_z_loss]\nkeys = ["rz"]\nper_layer = true\n'
    )
    table = AliasTable.load(good)
    assert table.resolve(["blk4:rz"])["blk4:rz"] == "router_z_loss_layer_4"
    bad = tmp_path / "bad.toml"
    bad.write_text("[layers]\npatterns = ['^(?P<pre>.+)_l(\\d+)$']\n")
    with pytest.raises(ConfigError, match=r"bad\.toml.*\(\?P<layer>"):
        AliasTable.load(bad)
    bad.write_text("[layers]\npatterns = ['^(?P<pre>.+_layer_(?P<layer>\\d+)$']\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: layers\.patterns: .* is not a regex"):
        AliasTable.load(bad)


def _read(tmp_path: Path, moe: Moe, seed: int, fmt: str) -> Run:
    name = {"tensorboard": "tb", "jsonl": "run.jsonl", "csv": "run.csv"}[fmt]
    path = write(tmp_path / f"{fmt}-{seed}" / name, series(moe, seed), fmt)
    return read_run(path)


def _router(run: Run) -> list[tuple[str, str, int | None, str]]:
    d = diagnose(run)
    jsonschema.validate(d.to_dict(), json.loads((SCHEMAS / "diagnosis.schema.json").read_text()))
    return [
        (e.kind, e.metric or "", e.onset_step, e.evidence)
        for e in d.events
        if e.kind.startswith("router_")
    ]


@pytest.mark.parametrize("fmt", ["tensorboard", "jsonl", "csv"])
def test_every_format_reads_the_family_and_keeps_nan_and_inf(tmp_path: Path, fmt: str) -> None:
    moe = Moe(fault="nonfinite", metric="z_loss", layer=5, onset=200)
    written = series(moe, 3)["moe/z_loss_layer_5"][1]
    run = _read(tmp_path, moe, 3, fmt)
    families = layer_families(run.metrics)
    assert sorted(families) == ["router_aux_loss", "router_z_loss"]
    assert list(families["router_z_loss"]) == list(range(moe.layers))
    got = run.frame.filter(pl.col("metric") == "router_z_loss_layer_5").sort("step")["value"]
    assert got.len() == written.size
    if fmt == "tensorboard":  # a float32 scalar, as torch's SummaryWriter writes it
        written = written.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(got.to_numpy(), written)  # NaN and inf where written
    assert int(np.isinf(got.to_numpy()).sum()) > 0 and int(np.isnan(got.to_numpy()).sum()) > 0
    # the key as logged stays beside the canonical name
    keys = run.frame.filter(pl.col("metric") == "router_z_loss_layer_5")["key"].unique()
    assert keys.to_list() == ["moe/z_loss_layer_5"]


@pytest.mark.parametrize(
    ("metric", "family", "naming", "seed"),
    [
        ("load_balancing_loss", "router_aux_loss", "megatron", 0),
        ("z_loss", "router_z_loss", "megatron", 1),
        ("load_balancing_loss", "router_aux_loss", "nemo_rl", 2),
        ("z_loss", "router_z_loss", "nemo_rl", 3),
    ],
)
def test_one_layers_router_climbing_is_named_with_its_layer(
    tmp_path: Path, metric: str, family: str, naming: str, seed: int
) -> None:
    layer = 4 + seed
    moe = Moe(fault="rise", metric=metric, layer=layer, onset=240, naming=naming)
    found = _router(_read(tmp_path, moe, seed, "jsonl"))
    assert len(found) == 1, found
    kind, metric_name, onset, evidence = found[0]
    assert (kind, metric_name) == ("router_loss_jump", f"{family}_layer_{layer}")
    # onset within max(5 steps, the log interval, 2% of the run)
    assert onset is not None and abs(onset - moe.onset) <= max(5, moe.every, 0.02 * 600)
    assert f"layer {layer}'s {family} rises from step {onset}" in evidence
    assert f"the other {moe.layers - len(moe.dense) - 1} layers stay within" in evidence


def test_one_layers_router_overflowing_is_named_and_the_label_is_unchanged(tmp_path: Path) -> None:
    moe = Moe(fault="nonfinite", metric="z_loss", layer=9, onset=330)
    run = _read(tmp_path, moe, 5, "tensorboard")
    d = diagnose(run)
    assert d.label == "healthy"  # evidence, not a label: the loss and gradient are fine
    found = [e for e in d.events if e.kind == "router_nonfinite"]
    assert len(found) == 1
    event = found[0]
    assert event.metric == "router_z_loss_layer_9" and event.onset_step == 330
    assert "layer 9's router_z_loss is" in event.evidence
    assert f"the other {moe.layers - len(moe.dense) - 1} layers stay finite" in event.evidence


def test_the_whole_router_moving_is_one_event_with_its_layer_count(tmp_path: Path) -> None:
    for run_level in (True, False):  # the run's own mean, or the layers' mean made here
        moe = Moe(fault="all", onset=260, run_level=run_level)
        found = _router(_read(tmp_path / str(run_level), moe, 6, "csv"))
        assert [(k, m) for k, m, _, _ in found] == [("router_loss_jump", "router_aux_loss")]
        assert "of 11 layers, the first layer" in found[0][3]  # the dense layer 0 left out


@pytest.mark.parametrize("seed", range(6))
def test_healthy_per_layer_routers_stay_quiet(tmp_path: Path, seed: int) -> None:
    # levels differ by layer, the load-balancing loss starts high and decays, the z-loss
    # drifts: no event, whatever the naming, layer count, or whether run-level values exist
    moe = Moe(
        layers=(12, 24, 48)[seed % 3],
        dense=((0,), (), (0, 1, 2))[seed % 3],
        naming=("megatron", "nemo_rl")[seed % 2],
        run_level=seed % 4 != 0,
        every=(1, 2, 5)[seed % 3],
    )
    assert _router(_read(tmp_path, moe, 100 + seed, "jsonl")) == []


def test_dense_layers_logging_zero_are_no_routers(tmp_path: Path) -> None:
    moe = Moe(layers=8, dense=(0, 1), fault="rise", layer=1, onset=200)  # layer 1 is dense
    assert _router(_read(tmp_path, moe, 7, "jsonl")) == []
    moe = replace(moe, layer=6)
    found = _router(_read(tmp_path / "b", moe, 7, "jsonl"))
    assert [m for _, m, _, _ in found] == ["router_aux_loss_layer_6"]
    assert "the other 5 layers" in found[0][3]


def test_several_layers_overflowing_are_counted_and_listed() -> None:
    rng = np.random.default_rng(4)
    steps = np.arange(0, 400, 2)
    arrays = {}
    for i in range(10):
        values = np.exp(rng.normal(np.log(0.02), 0.1, steps.size))
        if i in (2, 6):
            values[(steps >= 200 + 40 * (i == 6)) & (rng.random(steps.size) < 0.3)] = np.nan
            values[np.searchsorted(steps, 200 + 40 * (i == 6))] = -np.inf
        arrays[f"router_z_loss_layer_{i}"] = (steps, values)
    events = router.detect(from_arrays(arrays), DiagnoseConfig())
    found = [e for e in events if e.kind == "router_nonfinite"]
    assert len(found) == 1
    assert found[0].metric == "router_z_loss_layer_2" and found[0].onset_step == 200
    assert "non-finite in 2 of 10 layers (2, 6); the first, layer 2's, is -inf at step 200" in (
        found[0].evidence
    )
    assert "the other 8 layers stay finite" in found[0].evidence
