"""Structure-preserving, clustering-based expert pruning (the MoE proxy construction).

Per layer, the experts are clustered by their weights (k-means on the flattened expert
matrices); one representative per cluster — the expert nearest its centroid — is kept.
The backbone (attention, embeddings, norms, head) and the router are kept; the router's
rows are re-indexed to the kept experts, so routing among survivors is unchanged.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from scipy.cluster.vq import kmeans2

from proxydiag.lab.model import MoEPolicy


def cluster_representatives(vectors: np.ndarray, *, n_keep: int, seed: int) -> list[int]:
    """Indices of the rows of ``vectors`` nearest each of ``n_keep`` k-means centroids.

    >>> v = np.array([[0.0, 0], [0.1, 0], [5, 5], [5.1, 5]])
    >>> sorted(cluster_representatives(v, n_keep=2, seed=0))
    [0, 2]
    """
    n = vectors.shape[0]
    if n_keep >= n:
        return list(range(n))
    rng = np.random.default_rng(seed)
    centroids, labels = kmeans2(vectors, n_keep, minit="++", seed=rng)
    kept: list[int] = []
    for c in range(n_keep):
        members = np.flatnonzero(labels == c)
        if members.size == 0:
            continue
        dist = np.linalg.norm(vectors[members] - centroids[c], axis=1)
        kept.append(int(members[np.argmin(dist)]))
    # an empty cluster leaves a slot: fill with the experts farthest from those kept
    for i in np.argsort(-np.linalg.norm(vectors - vectors[kept].mean(0), axis=1)):
        if len(kept) >= n_keep:
            break
        if int(i) not in kept:
            kept.append(int(i))
    return sorted(kept)


def prune_experts(model: MoEPolicy, *, keep_ratio: float, seed: int) -> tuple[MoEPolicy, list[list[int]]]:
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
