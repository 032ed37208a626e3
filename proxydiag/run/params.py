"""Run metadata read from the configuration a trainer logs as params (MLflow, W&B config).

transformers' ``MLflowCallback`` and ``WandbCallback`` log the model config with the training
arguments, so an MoE run's params name its routed experts per layer. Without a sidecar or tag
saying ``experts_kept``, that count is what the run kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: model-config keys holding the routed experts per layer: Mixtral ``num_local_experts``,
#: Qwen2/3-MoE and OLMoE ``num_experts``, ERNIE/DeepSpeed-MoE ``moe_num_experts``, DeepSeek
#: V2/V3 ``n_routed_experts`` (``num_experts_per_tok`` is the top-k, not a count of experts)
EXPERT_KEYS = ("num_local_experts", "num_experts", "moe_num_experts", "n_routed_experts")


def experts_from_params(params: Mapping[str, Any]) -> int | None:
    """The routed experts per layer named by a run's params, or None.

    Keys may carry a prefix (``model/num_experts``, ``config.n_routed_experts``).

    >>> experts_from_params({"num_experts_per_tok": "2", "num_experts": "8"})
    8
    >>> experts_from_params({"model.n_routed_experts": 64}), experts_from_params({"lr": "1"})
    (64, None)
    """
    by_leaf: dict[str, Any] = {}
    for key, value in params.items():
        leaf = str(key).replace("/", ".").rsplit(".", 1)[-1]
        by_leaf.setdefault(leaf, value)
    for name in EXPERT_KEYS:
        value = by_leaf.get(name)
        try:
            count = float(str(value).strip()) if value is not None else None
        except ValueError:
            continue
        if count is not None and count.is_integer() and count >= 1:
            return int(count)
    return None


#: model-config keys holding the experts each token is routed to (the router's top-k):
#: HF MoE configs ``num_experts_per_tok``, Megatron-LM ``moe_router_topk``, marin/levanter
#: ``num_experts_per_token``, ERNIE ``moe_k`` (a bare ``top_k`` is a sampling setting too:
#: only a sidecar's ``top_k`` is read as the router's)
TOP_K_KEYS = ("num_experts_per_tok", "moe_router_topk", "num_experts_per_token", "moe_k")


def top_k_of(attrs: Mapping[str, Any]) -> int | None:
    """The router's top-k of a run: a sidecar's ``top_k``, else its params' (see
    :data:`TOP_K_KEYS`), else None.

    >>> top_k_of({"extra": {"top_k": 2}}), top_k_of({"params": {"model.moe_router_topk": "8"}})
    (2, 8)
    >>> top_k_of({"params": {"top_k": 50}}) is None
    True
    """
    sources: list[tuple[Mapping[str, Any], tuple[str, ...]]] = [(attrs, ("top_k",))]
    extra = attrs.get("extra")
    if isinstance(extra, Mapping):
        sources.append((extra, ("top_k", *TOP_K_KEYS)))
    params = attrs.get("params")
    if isinstance(params, Mapping):
        by_leaf: dict[str, Any] = {}
        for key, value in params.items():
            by_leaf.setdefault(str(key).replace("/", ".").rsplit(".", 1)[-1], value)
        sources.append((by_leaf, TOP_K_KEYS))
    for mapping, keys in sources:
        for name in keys:
            value = mapping.get(name)
            try:
                k = float(str(value).strip()) if value is not None else None
            except ValueError:
                continue
            if k is not None and k.is_integer() and k >= 1:
                return int(k)
    return None
