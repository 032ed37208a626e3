"""A proxy without routing: every token goes to every expert it kept.

A pruned proxy that keeps no more experts than its router's top-k routes every token to all of
them: its load-balancing and z losses, router entropy, expert loads and routing-replay or
routing-consistency shares measure nothing about routing (constants, or artefacts of the
router's softmax over a fixed set). Scored against the full run's they would read as diverged
metrics; the comparison leaves them out and says why.
"""

from __future__ import annotations

import re

from proxydiag.run import Run
from proxydiag.run.params import top_k_of

#: canonical routing metrics (``aliases.toml``); their per-layer families
#: (``router_aux_loss_layer_3``) are folded into them before scoring
#: (:func:`proxydiag.align.grid.shared_series`) and match :data:`RAW` too
CANONICAL = (
    "router_aux_loss",
    "router_z_loss",
    "router_entropy",
    "expert_load_max",
)
#: unmapped router keys: marin ``train/router/...``, any key under a ``router`` or ``moe``
#: namespace (a per-layer spelling the alias table does not resolve, ``moe/<name>_layer_<i>``)
RAW = re.compile(r"(^|/)(moe|router)(/|_)", re.IGNORECASE)


def is_routing(metric: str) -> bool:
    """Whether ``metric`` measures the router.

    >>> [is_routing(m) for m in ("router_z_loss", "mismatch_route_change",
    ...                          "moe/load_balancing_loss_layer_3", "grad_norm")]
    [True, True, True, False]
    """
    return metric in CANONICAL or metric.startswith("mismatch_route") or bool(RAW.search(metric))


def no_routing(proxy: Run) -> str | None:
    """Why ``proxy`` has no routing (its experts kept are at most its top-k), or None."""
    kept, top_k = proxy.attrs.get("experts_kept"), top_k_of(proxy.attrs)
    try:
        kept_n = int(kept) if kept is not None else None
    except (TypeError, ValueError):
        kept_n = None
    if kept_n is None or top_k is None or kept_n > top_k:
        return None
    return (
        f"the proxy keeps {kept_n} expert(s) per layer with top-k {top_k}: every token goes "
        "to every expert, it has no routing"
    )


__all__ = ["CANONICAL", "is_routing", "no_routing"]
