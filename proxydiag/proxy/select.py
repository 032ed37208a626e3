"""Which experts of a layer to keep: by clustering (``kmeans``), routing counts (``frequency``)
or router-weighted activation saliency (``reap``).

``reap`` is Router-weighted Expert Activation Pruning (Lasby et al., "REAP the Experts: Why
Pruning Prevails for One-Shot MoE compression", arXiv:2510.13999): an expert's saliency is the
mean, over the tokens routed to it (in their top-k), of its gate value times the L2 norm of its
output; the least salient experts are pruned. ``frequency`` keeps
the experts chosen most often. Both need calibration statistics
(:mod:`proxydiag.proxy.calibrate`); ``kmeans`` needs none (it clusters the weights) and uses
the experts' outputs on calibration tokens when they are given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.proxy._tensors import TensorInfo, read_floats
from proxydiag.proxy.cluster import BlockReader, cluster_representatives, sketch_experts
from proxydiag.proxy.layout import MoeLayer

METHODS = ("kmeans", "frequency", "reap")


@dataclass(frozen=True)
class LayerStats:
    """Calibration statistics of one layer's experts (arrays of length ``n_experts``)."""

    counts: np.ndarray  # tokens routed to each expert
    saliency: np.ndarray  # REAP: mean gate value x output norm over routed tokens (0: unrouted)
    outputs: np.ndarray  # (n_experts, features): each expert's outputs on shared sample tokens


def choose(
    layer: MoeLayer,
    tensors: dict[str, TensorInfo],
    *,
    method: str,
    n_keep: int,
    groups: int,
    seed: int,
    stats: LayerStats | None,
    sketch_dim: int,
) -> list[int]:
    """The sorted experts of ``layer`` to keep: ``n_keep // groups`` from each of ``groups``
    equal, contiguous groups (DeepSeek's routing groups; one group otherwise)."""
    if n_keep >= layer.n_experts:
        return list(range(layer.n_experts))
    size = layer.n_experts // groups
    if method == "kmeans":
        features = (
            stats.outputs
            if stats is not None
            else weight_features(layer, tensors, dim=sketch_dim, seed=seed)
        )
    elif stats is None:
        raise ValueError(f"method {method!r} needs calibration statistics")
    else:
        features = stats.counts if method == "frequency" else stats.saliency
    kept: list[int] = []
    for g in range(groups):
        part = features[g * size : (g + 1) * size]
        if method == "kmeans":
            local = cluster_representatives(part, n_keep=n_keep // groups, seed=seed + layer.index)
        else:
            local = top_scores(part, n_keep // groups)
        kept.extend(g * size + i for i in local)
    return sorted(kept)


def top_scores(scores: np.ndarray, n_keep: int) -> list[int]:
    """Indices of the ``n_keep`` highest scores; ties go to the lower index.

    >>> top_scores(np.array([3.0, 7.0, 3.0, 1.0]), 2)
    [0, 1]
    """
    order = np.lexsort((np.arange(scores.size), -scores))
    return sorted(int(i) for i in order[:n_keep])


def weight_features(
    layer: MoeLayer, tensors: dict[str, TensorInfo], *, dim: int, seed: int
) -> np.ndarray:
    """One row per expert: each weight tensor's elements (or their count sketch when a tensor
    has more than ``dim`` per expert), concatenated over tensors. Reads one block at a time."""
    parts = []
    for k, (read, n) in enumerate(_readers(layer, tensors)):
        if n <= dim:
            parts.append(np.stack([read(e, 0, n) for e in range(layer.n_experts)]))
        else:
            parts.append(
                sketch_experts(
                    read,
                    n_experts=layer.n_experts,
                    n_elements=n,
                    dim=dim,
                    seed=(seed, layer.index, k),
                )
            )
    return np.concatenate(parts, axis=1).astype(np.float64)


def _readers(layer: MoeLayer, tensors: dict[str, TensorInfo]) -> list[tuple[BlockReader, int]]:
    """Per tensor role, a reader of any expert's elements and the elements per expert."""
    out: list[tuple[BlockReader, int]] = []
    for role in layer.roles:
        infos = [tensors[layer.expert_name(e, role)] for e in range(layer.n_experts)]

        def per_expert(
            e: int, start: int, count: int, infos: list[TensorInfo] = infos
        ) -> np.ndarray:
            return read_floats(infos[e], start, count)

        out.append((per_expert, infos[0].numel))
    for name in layer.fused:
        info, per = tensors[name], tensors[name].numel // layer.n_experts

        def fused(
            e: int, start: int, count: int, info: TensorInfo = info, per: int = per
        ) -> np.ndarray:
            return read_floats(info, e * per + start, count)

        out.append((fused, per))
    return out
