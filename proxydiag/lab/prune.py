"""Structure-preserving, clustering-based expert pruning (the MoE proxy construction).

Per layer, the experts are clustered by their weights (k-means on the flattened expert
matrices); one representative per cluster — the expert nearest its centroid — is kept.
The backbone (attention, embeddings, norms, head) and the router are kept; the router's
rows are re-indexed to the kept experts, so routing among survivors is unchanged. The
clustering is :func:`proxydiag.proxy.cluster.cluster_representatives`, the one
``proxydiag proxy build`` uses on Hugging Face checkpoints.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from proxydiag.lab.model import MoEPolicy
from proxydiag.proxy.cluster import cluster_representatives


def prune_experts(
    model: MoEPolicy, *, keep_ratio: float, seed: int
) -> tuple[MoEPolicy, list[list[int]]]:
    """A pruned copy of ``model`` keeping ``keep_ratio`` of each layer's experts."""
    if not 0 < keep_ratio <= 1:
        raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio}")
    proxy = copy.deepcopy(model)
    kept_per_layer: list[list[int]] = []
    for layer, moe in enumerate(proxy.moes()):
        n_keep = max(1, round(moe.n_experts * keep_ratio))
        vecs = torch.cat([moe.w_in.flatten(1), moe.w_out.flatten(1)], dim=1).detach().numpy()
        kept = cluster_representatives(vecs.astype(np.float64), n_keep=n_keep, seed=seed + layer)
        idx = torch.tensor(kept)
        with torch.no_grad():
            moe.w_in = torch.nn.Parameter(moe.w_in[idx].clone())
            moe.w_out = torch.nn.Parameter(moe.w_out[idx].clone())
            router = torch.nn.Linear(moe.router.in_features, len(kept), bias=False)
            router.weight.copy_(moe.router.weight[idx])
            moe.router = router
        kept_per_layer.append(kept)
    return proxy, kept_per_layer
