"""Brief supervised pre-training on noisy sorting data, cached per (seed, config)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from proxydiag.lab.model import ModelConfig, MoEPolicy
from proxydiag.lab.task import PROMPT_LEN, pretrain_batch

#: pre-training batch size and label noise (part of the cache key)
BATCH = 64
NOISE = 0.35


def pretrain(
    cfg: ModelConfig,
    *,
    seed: int,
    steps: int = 400,
    batch: int = BATCH,
    noise: float = NOISE,
    cache_dir: Path | None = None,
) -> MoEPolicy:
    """A policy pre-trained for ``steps`` steps (loaded from ``cache_dir`` when present)."""
    path = (
        cache_dir / f"pretrained-{cache_key(cfg, seed, steps, batch, noise)}.pt"
        if cache_dir
        else None
    )
    torch.manual_seed(seed)
    model = MoEPolicy(cfg)
    if path is not None and path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model
    gen = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(steps):
        seq = pretrain_batch(batch, gen=gen, noise=noise)
        logits = model(seq[:, :-1])[:, PROMPT_LEN - 1 :]
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), seq[:, PROMPT_LEN:].reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # workers may pre-train the same model
        torch.save(model.state_dict(), tmp)
        tmp.replace(path)
    return model


def cache_key(
    cfg: ModelConfig, seed: int, steps: int, batch: int = BATCH, noise: float = NOISE
) -> str:
    """Every input of the pre-training in the name (two widths never share a checkpoint).

    >>> cache_key(ModelConfig(), 0, 400) == cache_key(ModelConfig(d_model=32), 0, 400)
    False
    """
    inputs = {"model": cfg.to_dict(), "seed": seed, "steps": steps, "batch": batch, "noise": noise}
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]
    return f"s{seed}-n{steps}-e{cfg.n_experts}-{digest}"
