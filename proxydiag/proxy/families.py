"""The MoE families a proxy can be built from, told by ``config.json``, and their config edits.

A family names the config keys that count routed experts and says what stays whole:
Qwen2-MoE's ``shared_expert`` (and its gate) and DeepSeek's ``shared_experts`` are not routed,
so they are copied like the backbone. Tensor names are the same for all families (see
:mod:`proxydiag.proxy.layout`); what differs is the config and DeepSeek's group routing.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError

#: config keys that hold the number of routed experts (transformers 5 writes Qwen3-MoE's
#: ``num_experts`` as ``num_local_experts``: every one present is read and updated)
COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


@dataclass(frozen=True)
class Family:
    """One MoE architecture family."""

    name: str
    model_types: tuple[str, ...]
    kept_whole: str = ""  # modules besides the backbone copied whole
    grouped: bool = False  # DeepSeek routes within ``n_group`` groups of experts


FAMILIES = (
    Family("mixtral", ("mixtral",)),
    Family("qwen2_moe", ("qwen2_moe",), kept_whole="shared_expert, shared_expert_gate"),
    Family("qwen3_moe", ("qwen3_moe",)),
    Family("olmoe", ("olmoe",)),
    Family("deepseek", ("deepseek_v2", "deepseek_v3"), kept_whole="shared_experts", grouped=True),
)


@dataclass(frozen=True)
class MoeConfig:
    """What pruning needs from ``config.json``."""

    family: Family
    n_experts: int
    top_k: int
    n_group: int  # 1 when routing is not grouped
    raw: dict[str, Any]


def read_config(folder: Path) -> MoeConfig:
    """The family and expert counts of a checkpoint folder; one-line errors say what is missing.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text('{"model_type": "llama", "hidden_size": 8}')
    >>> try:
    ...     read_config(d)
    ... except ConfigError as exc:
    ...     print(exc)
    /...config.json: no num_local_experts, ... not a mixture-of-experts config (model_type 'llama')
    """
    path = folder / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: missing; a Hugging Face checkpoint folder has one") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must hold a JSON object")
    model_type = raw.get("model_type")
    counts = {raw[k] for k in COUNT_KEYS if raw.get(k) is not None}
    if not counts:
        raise ConfigError(
            f"{path}: no {', '.join(COUNT_KEYS[:-1])} or {COUNT_KEYS[-1]}: not a "
            f"mixture-of-experts config (model_type {model_type!r})"
        )
    family = next((f for f in FAMILIES if model_type in f.model_types), None)
    if family is None:
        known = ", ".join(t for f in FAMILIES for t in f.model_types)
        raise ConfigError(
            f"{path}: model_type {model_type!r} is not a supported MoE family (supported: {known})"
        )
    if len(counts) > 1 or not all(isinstance(c, int) and c > 0 for c in counts):
        raise ConfigError(f"{path}: inconsistent expert counts {sorted(map(str, counts))}")
    top_k = raw.get("num_experts_per_tok")
    if not isinstance(top_k, int) or top_k < 1:
        raise ConfigError(f"{path}: num_experts_per_tok missing or not a positive integer")
    n_group = (raw.get("n_group") or 1) if family.grouped else 1
    return MoeConfig(family, counts.pop(), top_k, int(n_group), raw)


def pruned_config(cfg: MoeConfig, *, n_keep: int, groups_kept: int) -> dict[str, Any]:
    """``config.json`` of the proxy: expert counts set to ``n_keep``, ``num_experts_per_tok``
    capped at it, DeepSeek's groups kept (``groups_kept`` > 1) or collapsed to one."""
    raw = dict(cfg.raw)
    for key in COUNT_KEYS:
        if raw.get(key) is not None:
            raw[key] = n_keep
    if cfg.top_k > n_keep:
        warnings.warn(
            f"num_experts_per_tok {cfg.top_k} > the {n_keep} experts kept: capped at {n_keep}",
            UserWarning,
            stacklevel=2,
        )
        raw["num_experts_per_tok"] = n_keep
    if cfg.n_group > 1 and groups_kept == 1:
        warnings.warn(
            f"{n_keep} experts cannot keep {cfg.n_group} equal routing groups: "
            "n_group and topk_group set to 1 (routing picks the top-k among all kept "
            "experts)",
            UserWarning,
            stacklevel=2,
        )
        raw["n_group"] = 1
        raw["topk_group"] = 1
    return raw


def group_count(cfg: MoeConfig, n_keep: int) -> int:
    """Groups the kept experts can stay in: ``n_group`` when each group keeps the same number
    (at least two for DeepSeek-V3, whose group score is the sum of a group's top two), else 1.

    >>> cfg = MoeConfig(FAMILIES[-1], 8, 2, 2, {"model_type": "deepseek_v3"})
    >>> group_count(cfg, 4), group_count(cfg, 2), group_count(cfg, 3)
    (2, 1, 1)
    """
    if cfg.n_group <= 1 or n_keep % cfg.n_group:
        return 1
    least = 2 if cfg.raw.get("model_type") == "deepseek_v3" else 1
    return cfg.n_group if n_keep // cfg.n_group >= least else 1
