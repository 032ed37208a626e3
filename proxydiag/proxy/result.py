"""What a proxy build made: :class:`ProxyResult`, its ``proxydiag.json`` sidecar and its cost.

``cost_per_step`` is the proxy's parameters active in a training step over the source's,
as the lab's proxies state it. A step's batch of thousands of tokens routes some token to
nearly every expert, so the parameters a step activates — computes gradients for, holds
optimizer state and devices for — are the parameters held. Per *token*, with
``num_experts_per_tok`` unchanged, pruning leaves the active parameters (the FLOPs) as they
were; that count is in the sidecar's ``params`` too (``active_params_per_token``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxydiag.proxy._tensors import TensorInfo
from proxydiag.proxy.layout import MoeLayer


@dataclass(frozen=True)
class ProxyResult:
    """A built proxy: where, from what, how, and which experts each layer kept."""

    out: Path
    source: Path
    family: str
    method: str
    seed: int
    experts_total: int
    experts_kept: int
    top_k: int
    kept: tuple[tuple[int, tuple[int, ...]], ...]  # (layer index, kept experts) per MoE layer
    total_params: int
    active_params_per_token: int
    source_total_params: int
    source_active_params_per_token: int
    calibration: str | None
    files: tuple[str, ...]

    @property
    def cost_per_step(self) -> float:
        """Parameters held, relative to the source checkpoint."""
        return round(self.total_params / self.source_total_params, 4)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "source": str(self.source),
            "family": self.family,
            "method": self.method,
            "seed": self.seed,
            "experts_total": self.experts_total,
            "experts_kept": self.experts_kept,
            "num_experts_per_tok": self.top_k,
            "kept_experts": {str(i): list(k) for i, k in self.kept},
            "total_params": self.total_params,
            "active_params_per_token": self.active_params_per_token,
            "source_total_params": self.source_total_params,
            "source_active_params_per_token": self.source_active_params_per_token,
            "cost_per_step": self.cost_per_step,
            "calibration": self.calibration,
            "files": list(self.files),
        }

    def sidecar(self) -> dict[str, Any]:
        """The ``proxydiag.json`` that ``proxydiag ingest`` reads beside a run's logs."""
        params = {
            k: v
            for k, v in self.to_dict().items()
            if k not in ("out", "seed", "experts_total", "experts_kept", "cost_per_step", "files")
        }
        return {
            "role": "proxy",
            "experts_kept": self.experts_kept,
            "experts_total": self.experts_total,
            "seed": self.seed,
            "cost_per_step": self.cost_per_step,
            "params": params,
        }


def count_params(
    numels: list[int],
    layers: list[MoeLayer],
    *,
    n_active: int,
    n_held: int,
    tensors: dict[str, TensorInfo],
) -> tuple[int, int]:
    """``(total, active per token)`` parameters: the active count leaves out, in each MoE
    layer, the ``n_held - n_active`` experts a token does not use."""
    total = sum(numels)
    idle = 0
    for layer in layers:
        per_expert = sum(tensors[layer.expert_name(0, r)].numel for r in layer.roles)
        per_expert += sum(tensors[n].numel // layer.n_experts for n in layer.fused)
        idle += (n_held - n_active) * per_expert
    return total, total - idle
