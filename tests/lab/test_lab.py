"""The lab: real tiny MoE GRPO runs (seconds each), determinism and that faults show."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the lab needs torch (pip install 'proxydiag[lab]')")

from proxydiag.lab.prune import prune_experts  # noqa: E402
from proxydiag.lab.runner import LabRun, run_lab, small  # noqa: E402


def _series(run_dir: Path, key: str) -> np.ndarray:
    import proxydiag

    run = proxydiag.read_run(run_dir)
    metric = (
        next(m for m, k in run.mapping.items() if k == key) if key in run.mapping.values() else key
    )
    return run.series(metric)[1]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pretrained")


def test_pruning_keeps_backbone_and_reindexes_router(cache: Path) -> None:
    from proxydiag.lab.pretrain import pretrain

    spec = small(LabRun())
    full = pretrain(spec.model, seed=0, steps=5, cache_dir=cache)
    proxy, kept = prune_experts(full, keep_ratio=0.25, seed=0)
    assert [len(k) for k in kept] == [2] * spec.model.n_layers
    for layer, block in enumerate(proxy.blocks):
        src = full.blocks[layer].moe
        idx = torch.tensor(kept[layer])
        assert torch.equal(block.moe.router.weight, src.router.weight[idx])
        assert torch.equal(block.moe.w_in, src.w_in[idx])
    assert torch.equal(proxy.head.weight, full.head.weight)
    assert proxy.total_params() < full.total_params()


def test_run_is_deterministic_from_seed(tmp_path: Path, cache: Path) -> None:
    spec = small(LabRun(seed=3))
    run_lab(spec, tmp_path / "a", cache_dir=cache)
    run_lab(spec, tmp_path / "b", cache_dir=cache)
    for key in ("actor/grad_norm", "critic/score/mean", "training/rollout_probs_diff_mean"):
        a = _series(tmp_path / "a" / spec.name, key)
        b = _series(tmp_path / "b" / spec.name, key)
        np.testing.assert_array_equal(a, b)
    sidecar = json.loads((tmp_path / "a" / spec.name / "proxydiag.json").read_text())
    assert sidecar["role"] == "full" and sidecar["experts_kept"] == 8


def test_fp8_sampler_raises_mismatch_after_onset(tmp_path: Path, cache: Path) -> None:
    spec = replace(small(LabRun(fault="fp8_sampler", fault_step=6)), steps=12)
    run_lab(spec, tmp_path, cache_dir=cache)
    diff = _series(tmp_path / spec.name, "training/rollout_probs_diff_mean")
    assert diff[:6].max() < 1e-4
    assert diff[6:].min() > 10 * max(diff[:6].max(), 1e-6)


def test_fp16_static_scale_overflows_persistently(tmp_path: Path, cache: Path) -> None:
    spec = replace(
        small(LabRun(fault="fp16_static_scale", fault_step=6, precision="fp16")), steps=12
    )
    run_lab(spec, tmp_path, cache_dir=cache)
    skipped = _series(tmp_path / spec.name, "actor/skipped")
    scale = _series(tmp_path / spec.name, "actor/loss_scale")
    assert skipped[6:].mean() >= 0.8
    assert scale[-1] == 2.0**24


def test_lr_blowup_grows_grad_norm(tmp_path: Path, cache: Path) -> None:
    spec = replace(small(LabRun(fault="lr_blowup", fault_step=4)), steps=12)
    run_lab(spec, tmp_path, cache_dir=cache)
    lr = _series(tmp_path / spec.name, "actor/lr")
    assert lr[4] == pytest.approx(40 * lr[3], rel=0.3)


@pytest.mark.slow
def test_policy_collapse_reads_as_divergence_without_a_loss_spike(
    tmp_path: Path, cache: Path
) -> None:
    """An entropy bonus far too strong from step 40: reward falls, entropy and grad norm
    climb, the policy loss stays small; diagnosed ``loss_divergence`` near the onset."""
    from proxydiag.diagnose.api import diagnose
    from proxydiag.ingest import read_run

    spec = replace(LabRun(fault="policy_collapse", fault_step=40), steps=100)
    run_lab(spec, tmp_path, cache_dir=cache)
    reward = _series(tmp_path / spec.name, "critic/score/mean")
    entropy = _series(tmp_path / spec.name, "actor/entropy")
    pg = _series(tmp_path / spec.name, "actor/pg_loss")
    assert reward[-10:].mean() < 0.6 * reward[30:40].mean()
    assert entropy[-10:].mean() > 1.5 * entropy[30:40].mean()
    assert np.abs(pg).max() < 0.1  # no loss spike
    found = diagnose(read_run(tmp_path / spec.name))
    assert found.label == "loss_divergence"
    assert found.onset_step is not None and 40 <= found.onset_step <= 80
