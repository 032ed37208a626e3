"""Structure-preserving expert clustering: k-means on expert vectors, one representative each.

Per MoE layer, experts are clustered on a vector describing each (its weights, or its outputs
on calibration tokens); the expert nearest each centroid is kept, so the survivors span the
layer's experts instead of crowding into one region. Large experts are first reduced with a
seeded sparse sign projection (a count sketch: each weight is added, with a random sign, to one
of ``dim`` buckets), which keeps inner products in expectation (Charikar, Chen & Farach-Colton,
"Finding frequent items in data streams", ICALP 2002) at one pass over the weights and with
no projection matrix in memory. The lab (:mod:`proxydiag.lab.prune`) uses the same code.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.cluster.vq import kmeans2

#: weights hashed per block: bounds the sketch's memory (about 40 bytes per element: the
#: block read, widened, signed, and numpy's float64/intp copies inside ``bincount``)
SKETCH_BLOCK_ELEMENTS = 1 << 20


def cluster_representatives(vectors: np.ndarray, *, n_keep: int, seed: int) -> list[int]:
    """Indices of the rows of ``vectors`` nearest each of ``n_keep`` k-means centroids.

    Parameters
    ----------
    vectors
        One row per expert.
    n_keep
        How many experts to keep (all of them when ``n_keep`` >= the rows).
    seed
        Seeds the k-means++ initialisation: the same seed gives the same experts.

    Returns
    -------
    list[int]
        ``n_keep`` sorted row indices. A cluster left empty by k-means leaves a slot, filled
        with the experts farthest from the mean of those kept.

    Examples
    --------
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
    for i in np.argsort(-np.linalg.norm(vectors - vectors[kept].mean(0), axis=1)):
        if len(kept) >= n_keep:
            break
        if int(i) not in kept:
            kept.append(int(i))
    return sorted(kept)


#: reads ``count`` elements of one expert's tensor from element ``start``, as float32
BlockReader = Callable[[int, int, int], np.ndarray]


def sketch_experts(
    read: BlockReader,
    *,
    n_experts: int,
    n_elements: int,
    dim: int,
    seed: int | tuple[int, ...],
) -> np.ndarray:
    """Count-sketch of one tensor role of every expert: an ``(n_experts, dim)`` array.

    ``read(expert, start, count)`` returns that expert's elements ``[start, start+count)``.
    Every expert is hashed with the same buckets and signs (drawn per block from ``seed``), so
    distances between rows estimate distances between the experts' weights. Memory: a few
    arrays of :data:`SKETCH_BLOCK_ELEMENTS` (see there), whatever the expert size.

    Examples
    --------
    >>> w = np.random.default_rng(0).normal(size=(3, 10_000)).astype(np.float32)
    >>> w[1] = w[0] + 0.01
    >>> s = sketch_experts(lambda e, a, n: w[e, a:a + n], n_experts=3, n_elements=10_000,
    ...                    dim=256, seed=0)
    >>> bool(np.linalg.norm(s[0] - s[1]) < 0.1 * np.linalg.norm(s[0] - s[2]))
    True
    """
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    out = np.zeros((n_experts, dim), dtype=np.float64)
    for block, start in enumerate(range(0, n_elements, SKETCH_BLOCK_ELEMENTS)):
        count = min(SKETCH_BLOCK_ELEMENTS, n_elements - start)
        rng = np.random.default_rng([*np.atleast_1d(seed).tolist(), block])
        buckets = rng.integers(0, dim, size=count, dtype=np.intp)
        signs = rng.integers(0, 2, size=count, dtype=np.int8).astype(np.float32) * 2 - 1
        for expert in range(n_experts):
            values = read(expert, start, count) * signs
            out[expert] += np.bincount(buckets, weights=values, minlength=dim)
    return out
