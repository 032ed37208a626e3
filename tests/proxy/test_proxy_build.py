"""``proxydiag.proxy.build`` on tiny checkpoints of every family: shapes, router rows, logits,
generation, the sidecar, sharded and fused layouts, DeepSeek's groups, atomic output."""

from __future__ import annotations

import contextlib
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _proxy_models import FAMILIES, load, moe_blocks, save_model  # noqa: E402

from proxydiag.proxy import build  # noqa: E402


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    return {f: save_model(f, root / f) for f in FAMILIES}


@pytest.fixture(scope="module")
def originals(checkpoints: dict[str, Path]) -> dict[str, Any]:
    return {f: load(p) for f, p in checkpoints.items()}


INPUT = torch.tensor([[1, 5, 9, 12, 20, 33, 7, 4, 18, 2]])


@pytest.mark.parametrize("ratio", [0.5, 0.25, 0.125])
@pytest.mark.parametrize("family", FAMILIES)
def test_pruned_proxy_loads_with_kept_rows(
    family: str,
    ratio: float,
    tmp_path: Path,
    checkpoints: dict[str, Path],
    originals: dict[str, Any],
) -> None:
    warns = ratio == 0.125 or (family == "deepseek_v3" and ratio == 0.25)  # top-k or groups
    with pytest.warns(UserWarning) if warns else contextlib.nullcontext():
        result = build(checkpoints[family], tmp_path / "proxy", keep_ratio=ratio, seed=1)
    k = round(8 * ratio)
    proxy, full = load(tmp_path / "proxy"), originals[family]
    assert result.experts_kept == k and len(result.kept) == len(moe_blocks(full))
    for (layer, kept), (i, block) in zip(result.kept, moe_blocks(proxy).items(), strict=True):
        assert layer == i and len(kept) == k == len(set(kept))
        src = moe_blocks(full)[i]
        idx = torch.tensor(kept)
        assert torch.equal(block.gate.weight, src.gate.weight[idx])
        for name, param in block.experts.named_parameters():
            assert torch.equal(param, getattr(src.experts, name)[idx]), name
        if hasattr(src.gate, "e_score_correction_bias"):
            assert torch.equal(
                block.gate.e_score_correction_bias, src.gate.e_score_correction_bias[idx]
            )
    shared = {
        n: p
        for n, p in full.named_parameters()
        if ".experts." not in n and ".gate." not in n and not n.endswith("gate.weight")
    }
    for name, param in proxy.named_parameters():
        if name in shared:
            assert torch.equal(param, shared[name]), name
    assert proxy.config.num_experts_per_tok == min(2, k)
    side = json.loads((tmp_path / "proxy" / "proxydiag.json").read_text())
    assert side["role"] == "proxy" and side["experts_kept"] == k and side["experts_total"] == 8
    assert side["params"]["kept_experts"] == {str(i): list(kk) for i, kk in result.kept}
    assert side["cost_per_step"] < 1 and side["params"]["method"] == "kmeans"
    n_params = sum(p.numel() for p in proxy.parameters())
    n_params += sum(b.numel() for n, b in proxy.named_buffers() if "correction" in n)
    assert n_params == result.total_params


@pytest.mark.parametrize("family", FAMILIES)
def test_keep_all_gives_identical_logits(
    family: str, tmp_path: Path, checkpoints: dict[str, Path], originals: dict[str, Any]
) -> None:
    result = build(checkpoints[family], tmp_path / "same", keep_ratio=1.0)
    assert all(list(kept) == list(range(8)) for _, kept in result.kept)
    with torch.no_grad():
        a = originals[family](INPUT).logits
        b = load(tmp_path / "same")(INPUT).logits
    assert torch.equal(a, b)
    assert result.cost_per_step == 1.0


@pytest.mark.parametrize("family", ["mixtral", "deepseek_v3"])
def test_pruned_model_generates_and_routes_only_kept_experts(
    family: str, tmp_path: Path, checkpoints: dict[str, Path]
) -> None:
    build(checkpoints[family], tmp_path / "p", n_experts=4)
    proxy = load(tmp_path / "p")
    seen: list[int] = []
    hooks = [
        b.experts.register_forward_pre_hook(lambda m, args: seen.append(int(args[1].max())))
        for b in moe_blocks(proxy).values()
    ]
    out = proxy.generate(INPUT, max_new_tokens=5, do_sample=False)
    for h in hooks:
        h.remove()
    assert out.shape == (1, INPUT.shape[1] + 5)
    assert seen and max(seen) < 4


def test_same_seed_same_proxy_and_sketch_path(tmp_path: Path, checkpoints: dict[str, Path]) -> None:
    # sketch_dim 16 < every expert tensor: the count-sketch path, not raw weights
    a = build(checkpoints["olmoe"], tmp_path / "a", keep_ratio=0.5, seed=3, sketch_dim=16)
    b = build(checkpoints["olmoe"], tmp_path / "b", keep_ratio=0.5, seed=3, sketch_dim=16)
    assert a.kept == b.kept
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (
        tmp_path / "b" / "model.safetensors"
    ).read_bytes()


def test_deepseek_groups_kept_when_each_group_keeps_two(
    tmp_path: Path, checkpoints: dict[str, Path]
) -> None:
    result = build(checkpoints["deepseek_v3"], tmp_path / "g", keep_ratio=0.5)
    for _, kept in result.kept:
        assert sum(e < 4 for e in kept) == 2 and sum(e >= 4 for e in kept) == 2
    cfg = json.loads((tmp_path / "g" / "config.json").read_text())
    assert cfg["n_group"] == 2 and cfg["n_routed_experts"] == 4
    with pytest.warns(UserWarning, match="n_group and topk_group set to 1"):
        build(checkpoints["deepseek_v3"], tmp_path / "one", keep_ratio=0.25)
    cfg = json.loads((tmp_path / "one" / "config.json").read_text())
    assert cfg["n_group"] == 1 and cfg["topk_group"] == 1
    load(tmp_path / "one")(INPUT)


def test_sharded_input_and_output_round_trip(
    tmp_path: Path, checkpoints: dict[str, Path], originals: dict[str, Any]
) -> None:
    originals["qwen2_moe"].save_pretrained(tmp_path / "sharded", max_shard_size="40KB")
    src = tmp_path / "sharded"
    assert (src / "model.safetensors.index.json").exists()
    (src / "tokenizer.json").write_text((checkpoints["qwen2_moe"] / "tokenizer.json").read_text())
    result = build(src, tmp_path / "out", keep_ratio=1.0, max_shard_bytes=30_000)
    assert len(result.files) > 1 and (tmp_path / "out" / "tokenizer.json").exists()
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(result.files)
    with torch.no_grad():
        assert torch.equal(
            load(tmp_path / "out")(INPUT).logits, originals["qwen2_moe"](INPUT).logits
        )


def test_fused_layout_is_read_and_kept(tmp_path: Path, originals: dict[str, Any]) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    full = originals["mixtral"]
    src = tmp_path / "fused"
    src.mkdir()
    save_file(
        {k: v.contiguous() for k, v in full.state_dict().items()},
        src / "model.safetensors",
        metadata={"format": "pt"},
    )
    full.config.save_pretrained(src)
    result = build(src, tmp_path / "out", n_experts=3, seed=2)
    with safe_open(tmp_path / "out" / "model.safetensors", "pt") as f:
        names = set(f.keys())
        fused = f.get_tensor("model.layers.1.mlp.experts.gate_up_proj")
    assert not any(".experts.0." in n for n in names)
    kept = torch.tensor(dict(result.kept)[1])
    assert torch.equal(fused, full.model.layers[1].mlp.experts.gate_up_proj[kept])
    proxy = load(tmp_path / "out")
    assert torch.equal(
        proxy.model.layers[1].mlp.gate.weight, full.model.layers[1].mlp.gate.weight[kept]
    )


def test_interrupted_build_leaves_nothing(
    tmp_path: Path, checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = importlib.import_module("proxydiag.proxy.build")

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(mod, "_copy_extras", broken)
    with pytest.raises(KeyboardInterrupt):
        build(checkpoints["mixtral"], tmp_path / "out", keep_ratio=0.5)
    assert list(tmp_path.iterdir()) == []


def test_force_replaces_and_refuses_without(tmp_path: Path, checkpoints: dict[str, Path]) -> None:
    from proxydiag.errors import ConfigError

    build(checkpoints["mixtral"], tmp_path / "out", keep_ratio=0.5)
    with pytest.raises(ConfigError, match="exists; pass --force"):
        build(checkpoints["mixtral"], tmp_path / "out", keep_ratio=0.25)
    result = build(checkpoints["mixtral"], tmp_path / "out", keep_ratio=0.25, force=True)
    assert result.experts_kept == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert json.loads((tmp_path / "out" / "config.json").read_text())["num_local_experts"] == 2


def test_sidecar_beside_a_proxy_run_is_read_by_ingest(
    tmp_path: Path, checkpoints: dict[str, Path]
) -> None:
    import proxydiag

    result = build(checkpoints["qwen3_moe"], tmp_path / "proxy", n_experts=2, seed=4)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.csv").write_text("step,actor/pg_loss\n0,1.0\n1,0.9\n2,0.8\n")
    (run_dir / "proxydiag.json").write_bytes((tmp_path / "proxy" / "proxydiag.json").read_bytes())
    run = proxydiag.read_run(run_dir)
    assert run.attrs["role"] == "proxy" and run.attrs["experts_kept"] == 2
    assert run.attrs["cost_per_step"] == result.cost_per_step
    assert run.attrs["params"]["kept_experts"] == {str(i): list(k) for i, k in result.kept}
