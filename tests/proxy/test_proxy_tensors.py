"""Safetensors read by byte range: float decoding against torch's, and an FP8 checkpoint (as
DeepSeek-V3 releases its weights, with per-expert scales) pruned and clustered on its weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from proxydiag.proxy._tensors import DTYPE_BYTES, read_floats, read_header  # noqa: E402


@pytest.mark.parametrize(
    ("code", "dtype"),
    [
        ("F8_E4M3", "float8_e4m3fn"),
        ("F8_E5M2", "float8_e5m2"),
        ("BF16", "bfloat16"),
        ("F16", "float16"),
        ("F64", "float64"),
    ],
)
def test_read_floats_equals_torch(code: str, dtype: str, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    width = DTYPE_BYTES[code]
    raw = torch.arange(256 ** min(width, 2), dtype=torch.int32)
    if width == 1:
        values = raw.to(torch.uint8).view(getattr(torch, dtype))
    else:  # every bf16/f16 bit pattern; f64 from normals
        values = (
            raw.to(torch.int16).view(getattr(torch, dtype))
            if width == 2
            else torch.randn(1000, dtype=torch.float64)
        )
    save_file({"t": values}, tmp_path / "t.safetensors")
    info = read_header(tmp_path / "t.safetensors")[0]["t"]
    got = read_floats(info, 0, values.numel())
    np.testing.assert_array_equal(got, values.float().numpy())
    np.testing.assert_array_equal(read_floats(info, 7, 5), values.float().numpy()[7:12])


def test_fp8_checkpoint_with_scales_is_pruned_by_bytes(tmp_path: Path) -> None:
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    from proxydiag.proxy import build

    gen = torch.Generator().manual_seed(0)
    tensors = {
        "model.embed_tokens.weight": torch.randn(16, 8, generator=gen),
        "model.layers.0.mlp.gate.weight": torch.randn(4, 8, generator=gen),
    }
    for e in range(4):
        for role in ("gate_proj", "up_proj", "down_proj"):
            name = f"model.layers.0.mlp.experts.{e}.{role}"
            tensors[f"{name}.weight"] = torch.randn(8, 8, generator=gen).to(torch.float8_e4m3fn)
            tensors[f"{name}.weight_scale_inv"] = torch.rand(1, 1, generator=gen)
    src = tmp_path / "src"
    src.mkdir()
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    (src / "config.json").write_text(
        json.dumps({"model_type": "deepseek_v3", "n_routed_experts": 4, "num_experts_per_tok": 2})
    )
    result = build(src, tmp_path / "out", n_experts=2, sketch_dim=16)
    (kept,) = [k for _, k in result.kept]
    with safe_open(tmp_path / "out" / "model.safetensors", "pt") as f:
        for new, old in enumerate(kept):
            for suffix in ("up_proj.weight", "down_proj.weight_scale_inv"):
                got = f.get_tensor(f"model.layers.0.mlp.experts.{new}.{suffix}")
                want = tensors[f"model.layers.0.mlp.experts.{old}.{suffix}"]
                assert got.dtype == want.dtype
                assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
        assert torch.equal(
            f.get_tensor("model.layers.0.mlp.gate.weight"),
            tensors["model.layers.0.mlp.gate.weight"][list(kept)],
        )
