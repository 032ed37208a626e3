"""``proxydiag proxy build`` on a synthetic Mixtral-layout checkpoint of several GB, to 25%.

The benchmark writes the checkpoint itself, tensor by tensor, into a temporary folder (bf16,
normal weights drawn from one shared pool at random offsets so experts differ; 4 shards with
an index, as on the hub) and removes it afterwards. Full size: 8 layers of 8 experts, hidden
2048, expert width 5632, vocabulary 32,000 — 4.8 GB, 554 MB of experts per layer. The build
runs in a fresh process that reports its wall time and its peak resident memory above the
imported interpreter, set against one layer's experts: streaming means that ratio stays
below 1 however many layers there are. The source is read from the page cache (just written).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import Context, Row

_JOB = """
import json, re, sys, time
from pathlib import Path
import proxydiag.proxy
def status(field):
    return int(re.search(field + r":\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
Path("/proc/self/clear_refs").write_text("5")
base = status("VmRSS")
t0 = time.perf_counter()
result = proxydiag.proxy.build(sys.argv[1], sys.argv[2], keep_ratio=0.25, force=True)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "peak_kb": status("VmHWM") - base,
                  "kept": result.experts_kept, "params": result.total_params}))
"""


def shapes(
    *, layers: int, experts: int, hidden: int, width: int, vocab: int
) -> dict[str, tuple[int, ...]]:
    """Tensor names and shapes of a Mixtral checkpoint (hub layout, per-expert tensors)."""
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}"
        for name in ("q_proj", "o_proj"):
            out[f"{p}.self_attn.{name}.weight"] = (hidden, hidden)
        for name in ("k_proj", "v_proj"):
            out[f"{p}.self_attn.{name}.weight"] = (hidden // 4, hidden)
        out[f"{p}.block_sparse_moe.gate.weight"] = (experts, hidden)
        for e in range(experts):
            for w, shape in (
                ("w1", (width, hidden)),
                ("w2", (hidden, width)),
                ("w3", (width, hidden)),
            ):
                out[f"{p}.block_sparse_moe.experts.{e}.{w}.weight"] = shape
        out[f"{p}.input_layernorm.weight"] = (hidden,)
        out[f"{p}.post_attention_layernorm.weight"] = (hidden,)
    out["model.norm.weight"] = (hidden,)
    out["lm_head.weight"] = (vocab, hidden)
    return out


def write_checkpoint(
    folder: Path, tensors: dict[str, tuple[int, ...]], *, shards: int, config: dict[str, object]
) -> int:
    """Write ``tensors`` as bf16 safetensors shards with an index; returns the bytes written."""
    rng = np.random.default_rng(0)
    pool = (rng.standard_normal(1 << 24, dtype=np.float32) * 0.02).view(np.uint32) >> 16
    pool = pool.astype(np.uint16)
    names = list(tensors)
    per = math.ceil(len(names) / shards)
    weight_map: dict[str, str] = {}
    total = 0
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = names[s * per : (s + 1) * per]
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for n in part:
            size = 2 * math.prod(tensors[n])
            header[n] = {
                "dtype": "BF16",
                "shape": list(tensors[n]),  # type: ignore[dict-item]
                "data_offsets": [offset, offset + size],
            }
            offset += size
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with (folder / file).open("wb") as fh:
            fh.write(len(raw).to_bytes(8, "little") + raw)
            for n in part:
                count = math.prod(tensors[n])
                start = int(rng.integers(0, pool.size))
                fh.write(np.resize(np.roll(pool, -start), count).tobytes())
                weight_map[n] = file
        total += offset
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    (folder / "config.json").write_text(json.dumps(config))
    return total


def run(ctx: Context) -> list[Row]:
    dims = dict(
        layers=ctx.size(8, 2),
        experts=8,
        hidden=ctx.size(2048, 64),
        width=ctx.size(5632, 128),
        vocab=ctx.size(32_000, 256),
    )
    config = {
        "model_type": "mixtral",
        "architectures": ["MixtralForCausalLM"],
        "num_local_experts": dims["experts"],
        "num_experts_per_tok": 2,
        "hidden_size": dims["hidden"],
        "intermediate_size": dims["width"],
        "num_hidden_layers": dims["layers"],
        "vocab_size": dims["vocab"],
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "torch_dtype": "bfloat16",
    }
    layer_experts_mb = dims["experts"] * 3 * dims["hidden"] * dims["width"] * 2 / 2**20
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        src, dst = Path(tmp) / "full", Path(tmp) / "proxy"
        src.mkdir()
        size = write_checkpoint(src, shapes(**dims), shards=4, config=config)
        res = subprocess.run(
            [sys.executable, "-c", _JOB, str(src), str(dst)],
            capture_output=True,
            text=True,
            check=True,
        )
        found = json.loads(res.stdout.strip().splitlines()[-1])
        out_mb = sum(p.stat().st_size for p in dst.glob("*.safetensors")) / 2**20
    peak_mb = found["peak_kb"] / 1024
    group = (
        f"proxy build: {size / 2**30:.2f} GB Mixtral-layout bf16, {dims['layers']} layers "
        f"x 8 experts -> 25%"
    )
    note = (
        f"peak = {peak_mb / layer_experts_mb:.2f}x one layer's experts "
        f"({layer_experts_mb:.0f} MB); wrote {out_mb:.0f} MB; "
        f"{size / 2**20 / found['seconds']:.0f} MB/s of source"
    )
    return [Row(group, "proxydiag", [found["seconds"]], peak_mb=peak_mb, note=note)]
