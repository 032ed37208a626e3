"""Routing statistics of each MoE layer on calibration text, from a forward pass on CPU.

The model is loaded whole with ``transformers`` (its dtype as saved): this path's memory is
the checkpoint's size plus activations, unlike weight clustering, which streams. A forward
pre-hook on each layer's ``experts`` module sees the tokens entering it, the experts the
router chose and their gate values — the same three arguments in every supported family — so
no family's routing is re-implemented here. Each expert's output is then computed by the
module itself on the tokens routed to it (gate value 1), for REAP's output norm.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from proxydiag.errors import ConfigError, MissingExtraError
from proxydiag.proxy.select import LayerStats

_LAYER = re.compile(r"layers\.(\d+)\.")


def read_texts(path: Path) -> list[str]:
    """Calibration samples: one per non-empty line, or the ``text`` field of each JSONL line."""
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read calibration text ({exc})") from exc
    if path.suffix == ".jsonl":
        try:
            lines = [str(json.loads(ln)["text"]) for ln in lines]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: each JSONL line needs a 'text' field ({exc})") from exc
    if not lines:
        raise ConfigError(f"{path}: no calibration text")
    return lines


def routing_stats(
    folder: Path,
    calibration: Path,
    *,
    n_experts: int,
    max_tokens: int,
    sample_tokens: int,
    offload_dir: Path | None = None,
) -> dict[int, LayerStats]:
    """Per MoE layer index: tokens routed to each expert, REAP saliency, and each expert's
    outputs on the layer's first ``sample_tokens`` tokens (features for k-means).

    With ``offload_dir``, every decoder layer stays on disk and is loaded only while it runs
    (accelerate's disk offload): RAM holds the embeddings, the head and one layer; tensors
    that transformers converts on load (per-expert weights fused) are written to
    ``offload_dir`` first, the others are read from the checkpoint's own files."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError("transformers", "trainers") from exc
    texts = read_texts(calibration)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{folder}: no tokenizer to read the calibration text ({exc})") from exc
    try:
        placement = (
            {}
            if offload_dir is None
            else {"device_map": _layers_on_disk(folder), "offload_folder": str(offload_dir)}
        )
        model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype="auto", **placement)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ConfigError(
            f"{folder}: transformers cannot load the model for calibration ({_first_line(exc)})"
        ) from exc
    model.eval()
    acc: dict[int, _Accumulator] = {}
    handles = []
    for name, module in model.named_modules():
        m = _LAYER.search(name)
        if m and name.endswith(".experts") and type(module).__name__.endswith("Experts"):
            acc[int(m[1])] = _Accumulator(n_experts, sample_tokens)
            handles.append(module.register_forward_pre_hook(acc[int(m[1])].hook, with_kwargs=True))
    try:
        _forward(model, tokenizer, texts, max_tokens=max_tokens)
    except (RuntimeError, ValueError, IndexError) as exc:
        raise ConfigError(
            f"{folder}: the model failed on the calibration text ({_first_line(exc)})"
        ) from exc
    finally:
        for h in handles:
            h.remove()
    return {layer: a.stats() for layer, a in acc.items()}


def _forward(model: Any, tokenizer: Any, texts: list[str], *, max_tokens: int) -> None:
    """Run ``texts`` through ``model``, one sample at a time, up to ``max_tokens`` tokens."""
    import torch

    seen = 0
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(
                text, return_tensors="pt", truncation=True, max_length=max(1, max_tokens - seen)
            )["input_ids"]
            model(input_ids=ids)
            seen += int(ids.numel())
            if seen >= max_tokens:
                break


def _layers_on_disk(folder: Path) -> dict[str, str]:
    """A device map with each decoder layer offloaded to disk and the rest in RAM (module
    names shared by every supported family in transformers 5)."""
    n_layers = int(json.loads((folder / "config.json").read_text())["num_hidden_layers"])
    return {
        "model.embed_tokens": "cpu",
        "model.rotary_emb": "cpu",
        "model.norm": "cpu",
        "lm_head": "cpu",
        **{f"model.layers.{i}": "disk" for i in range(n_layers)},
    }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Accumulator:
    """Sums for one layer, fed by the pre-hook of its ``experts`` module."""

    def __init__(self, n_experts: int, sample_tokens: int) -> None:
        self.n = n_experts
        self.counts = np.zeros(n_experts)
        self.weighted = np.zeros(n_experts)
        self.sample_tokens = sample_tokens
        self.outputs: list[list[np.ndarray]] = [[] for _ in range(n_experts)]
        self.sampled = 0

    def hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        x, index, gate = (*args, *kwargs.values())[:3]
        token, slot = ((index >= 0) & (index < self.n)).nonzero(as_tuple=True)
        expert = index[token, slot]
        norms = _expert_outputs(module, x[token], expert).norm(dim=-1)
        weighted = gate[token, slot].float() * norms
        self.counts += torch.bincount(expert, minlength=self.n)[: self.n].numpy()
        self.weighted += (
            torch.bincount(expert, weights=weighted, minlength=self.n)[: self.n].double().numpy()
        )
        take = min(self.sample_tokens - self.sampled, x.shape[0])
        if take > 0:
            every = torch.arange(self.n).repeat_interleave(take)
            y = _expert_outputs(module, x[:take].repeat(self.n, 1), every)
            for j in range(self.n):
                self.outputs[j].append(y[j * take : (j + 1) * take].numpy().ravel())
            self.sampled += take

    def stats(self) -> LayerStats:
        saliency = np.divide(
            self.weighted, self.counts, out=np.zeros(self.n), where=self.counts > 0
        )
        outputs = np.stack([np.concatenate(o) if o else np.zeros(1) for o in self.outputs])
        return LayerStats(counts=self.counts, saliency=saliency, outputs=outputs.astype(np.float64))


def _expert_outputs(module: Any, x: Any, experts: Any) -> Any:
    """Each token's output from its expert ``experts[i]`` (gate value 1), computed by the
    experts module itself in one call (one load of the layer's experts when offloaded)."""
    import torch

    gate = torch.ones((x.shape[0], 1), dtype=x.dtype)
    return module.forward(x, experts.reshape(-1, 1).long(), gate).float()
