"""Calibration methods against an independent computation on a tiny Mixtral: ``frequency``
keeps the most-routed experts, ``reap`` the highest mean gate x output norm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _proxy_models import WORDS, load, save_model  # noqa: E402

from proxydiag.errors import ConfigError  # noqa: E402
from proxydiag.proxy import build  # noqa: E402


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_model("mixtral", tmp_path_factory.mktemp("m") / "mixtral", seed=4)


@pytest.fixture(scope="module")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, size=12)) for _ in range(8)]
    path = tmp_path_factory.mktemp("c") / "calib.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _reference(folder: Path, calibration: Path) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per layer: routed counts and REAP saliency, from the MoE blocks' inputs and the
    Mixtral equations (softmax, top-2 renormalised, SwiGLU experts) written out here."""
    from transformers import AutoTokenizer

    model, tok = load(folder), AutoTokenizer.from_pretrained(folder)
    inputs: dict[int, list[Any]] = {0: [], 1: []}
    hooks = [
        layer.mlp.register_forward_pre_hook(
            lambda m, a, i=i: inputs[i].append(a[0].reshape(-1, a[0].shape[-1]))
        )
        for i, layer in enumerate(model.model.layers)
    ]
    with torch.no_grad():
        for line in calibration.read_text().splitlines():
            model(input_ids=tok(line, return_tensors="pt")["input_ids"])
    for h in hooks:
        h.remove()
    out = {}
    torch.set_grad_enabled(False)
    for i, layer in enumerate(model.model.layers):
        x = torch.cat(inputs[i])
        probs = torch.softmax(x @ layer.mlp.gate.weight.T, dim=-1)
        top, idx = probs.topk(2, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        counts, saliency = np.zeros(8), np.zeros(8)
        gate_up, down = layer.mlp.experts.gate_up_proj, layer.mlp.experts.down_proj
        for j in range(8):
            tok_j, slot = (idx == j).nonzero(as_tuple=True)
            g, u = (x[tok_j] @ gate_up[j].T).chunk(2, dim=-1)
            y = (torch.nn.functional.silu(g) * u) @ down[j].T
            counts[j] = tok_j.numel()
            saliency[j] = float((top[tok_j, slot] * y.norm(dim=-1)).mean()) if counts[j] else 0
        out[i] = counts, saliency
    torch.set_grad_enabled(True)
    return out


def _top(scores: np.ndarray, k: int) -> list[int]:
    return sorted(np.lexsort((np.arange(scores.size), -scores))[:k].tolist())


def test_frequency_and_reap_match_a_reference(
    mixtral: Path, calibration: Path, tmp_path: Path
) -> None:
    ref = _reference(mixtral, calibration)
    freq = build(mixtral, tmp_path / "f", n_experts=4, method="frequency", calibration=calibration)
    reap = build(mixtral, tmp_path / "r", n_experts=4, method="reap", calibration=calibration)
    for layer, kept in freq.kept:
        assert list(kept) == _top(ref[layer][0], 4)
    for layer, kept in reap.kept:
        assert list(kept) == _top(ref[layer][1], 4)
    side = json.loads((tmp_path / "r" / "proxydiag.json").read_text())
    assert side["params"]["method"] == "reap" and side["params"]["calibration"] == str(calibration)
    load(tmp_path / "r")


@pytest.mark.parametrize("family", ["mixtral", "deepseek_v3"])
def test_calibration_offloaded_layer_by_layer_gives_the_same_stats(
    family: str, calibration: Path, tmp_path: Path
) -> None:
    from proxydiag.proxy.calibrate import routing_stats

    folder = save_model(family, tmp_path / family)
    kwargs = dict(n_experts=8, max_tokens=10_000, sample_tokens=8)
    in_ram = routing_stats(folder, calibration, **kwargs)  # type: ignore[arg-type]
    on_disk = routing_stats(folder, calibration, offload_dir=tmp_path / "off", **kwargs)  # type: ignore[arg-type]
    assert sorted(in_ram) == sorted(on_disk) and any((tmp_path / "off").iterdir())
    for layer, a in in_ram.items():
        b = on_disk[layer]
        np.testing.assert_array_equal(a.counts, b.counts)
        np.testing.assert_allclose(a.saliency, b.saliency, rtol=1e-5)
        np.testing.assert_allclose(a.outputs, b.outputs, rtol=1e-5, atol=1e-7)


def test_kmeans_on_calibration_outputs_is_deterministic(
    mixtral: Path, calibration: Path, tmp_path: Path
) -> None:
    a = build(mixtral, tmp_path / "a", n_experts=3, calibration=calibration, seed=5)
    b = build(mixtral, tmp_path / "b", n_experts=3, calibration=calibration, seed=5)
    assert a.kept == b.kept and all(len(set(k)) == 3 for _, k in a.kept)


def test_ranking_methods_need_calibration(mixtral: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="give --calibration"):
        build(mixtral, tmp_path / "x", keep_ratio=0.5, method="reap")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "family", ["qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3"]
)
def test_every_family_is_hooked_and_counts_every_routed_token(
    family: str, calibration: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    from proxydiag.proxy.calibrate import routing_stats

    folder = save_model(family, tmp_path / family)
    stats = routing_stats(folder, calibration, n_experts=8, max_tokens=10_000, sample_tokens=16)
    tok = AutoTokenizer.from_pretrained(folder)
    tokens = sum(len(tok(line)["input_ids"]) for line in calibration.read_text().splitlines())
    moe_layers = [1] if family.startswith("deepseek") else [0, 1]
    assert sorted(stats) == moe_layers
    for s in stats.values():
        assert s.counts.sum() == tokens * 2  # top-2 routing
        assert s.outputs.shape == (8, 16 * 32) and np.all(s.saliency >= 0)
