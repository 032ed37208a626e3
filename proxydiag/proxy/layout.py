"""Where each MoE layer's experts and router are among a checkpoint's tensors.

Two layouts hold routed experts, and both are read and kept as found:

- per expert, as checkpoints on the Hugging Face hub store them:
  ``model.layers.3.block_sparse_moe.experts.5.w1.weight`` (Mixtral),
  ``model.layers.3.mlp.experts.5.gate_proj.weight`` (Qwen-MoE, OLMoE, DeepSeek);
- fused, as ``transformers`` 5 holds them in memory: ``model.layers.3.mlp.experts.gate_up_proj``
  of shape ``(experts, ...)`` (and any per-expert bias of shape ``(experts, ...)``).

The router is every tensor under the block's ``gate.`` whose first dimension is the expert
count: its weight rows, and DeepSeek-V3's ``e_score_correction_bias``. Shared experts
(``shared_expert``, ``shared_experts``) match neither and are copied whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proxydiag.errors import IngestError
from proxydiag.proxy._tensors import TensorInfo

_EXPERT = re.compile(
    r"^(?P<block>(?:.*\.)?layers\.(?P<layer>\d+)\.(?:block_sparse_moe|mlp))\.experts\.(?P<rest>.+)$"
)
_PER_EXPERT = re.compile(r"^(?P<expert>\d+)\.(?P<role>.+)$")


@dataclass(frozen=True)
class MoeLayer:
    """One MoE layer's tensors: ``roles`` per expert, ``fused`` and ``router`` by row."""

    index: int
    block: str
    n_experts: int
    roles: tuple[str, ...]
    fused: tuple[str, ...]
    router: tuple[str, ...]

    def expert_name(self, expert: int, role: str) -> str:
        return f"{self.block}.experts.{expert}.{role}"


def find_layers(tensors: dict[str, TensorInfo], *, n_experts: int, where: str) -> list[MoeLayer]:
    """The MoE layers of a checkpoint, checked against the config's ``n_experts``.

    >>> from pathlib import Path
    >>> def t(name, *shape): return TensorInfo(name, "F32", shape, Path("m"), 0, 0)
    >>> names = [t(f"model.layers.0.mlp.experts.{e}.up_proj.weight", 4, 2) for e in range(2)]
    >>> router = t("model.layers.0.mlp.gate.weight", 2, 2)
    >>> found = find_layers({x.name: x for x in [*names, router]}, n_experts=2, where="m")
    >>> found[0].roles, found[0].router
    (('up_proj.weight',), ('model.layers.0.mlp.gate.weight',))
    """
    blocks: dict[str, dict[str, set[str]]] = {}
    for name in tensors:
        m = _EXPERT.match(name)
        if m:
            blocks.setdefault(m["block"], {}).setdefault("names", set()).add(m["rest"])
    if not blocks:
        raise IngestError(
            f"{where}: no routed expert tensors (looked for "
            "'layers.N.mlp.experts.*' and 'layers.N.block_sparse_moe.experts.*')"
        )
    layers = [
        _layer(block, parts["names"], tensors, n_experts, where) for block, parts in blocks.items()
    ]
    return sorted(layers, key=lambda layer: layer.index)


def _layer(
    block: str, rests: set[str], tensors: dict[str, TensorInfo], n_experts: int, where: str
) -> MoeLayer:
    per: dict[int, set[str]] = {}
    fused: list[str] = []
    for rest in rests:
        m = _PER_EXPERT.match(rest)
        if m:
            per.setdefault(int(m["expert"]), set()).add(m["role"])
        else:
            fused.append(f"{block}.experts.{rest}")
    if per and sorted(per) != list(range(n_experts)):
        raise IngestError(
            f"{where}: {block} has experts {_span(sorted(per))}, the config says {n_experts}"
        )
    roles = set().union(*per.values()) if per else set()
    uneven = next((e for e, r in per.items() if r != roles), None)
    if uneven is not None:
        raise IngestError(
            f"{where}: {block}.experts.{uneven} lacks "
            f"{sorted(roles - per[uneven])[0]!r}, which other experts have"
        )
    for name in fused:
        if not tensors[name].shape or tensors[name].shape[0] != n_experts:
            raise IngestError(
                f"{where}: fused tensor {name} has shape "
                f"{list(tensors[name].shape)}, not ({n_experts}, ...) experts"
            )
    router = tuple(
        sorted(
            n
            for n, t in tensors.items()
            if n.startswith(f"{block}.gate.") and t.shape and t.shape[0] == n_experts
        )
    )
    if not any(n.endswith(".weight") for n in router):
        raise IngestError(
            f"{where}: {block} has experts but no router {block}.gate.weight with {n_experts} rows"
        )
    index = int(block.rsplit(".", 2)[-2])
    return MoeLayer(index, block, n_experts, tuple(sorted(roles)), tuple(sorted(fused)), router)


def _span(indices: list[int]) -> str:
    return f"{len(indices)} ({indices[0]}..{indices[-1]})"
