"""The sampler's copy of the weights: dtype, fake quantisation and the weight-sync path.

Faults injected here are real numerics, not painted on: bf16 or fake-fp8 sampler weights
against the fp32 learner, a stale or partially broken sync, a sync that leaves the sampler's
routers stale (the rollout routes tokens on old router weights while the learner's router
moves), and round-to-nearest bf16 export of the master weights *as increments* so that small
updates vanish (the "rounding lag" failure: the served policy falls behind the learner).
"""

from __future__ import annotations

import torch

from proxydiag.lab.model import MoEPolicy

SYNC_MODES = ("exact", "bf16", "fp8", "stale", "partial", "stale_router", "bf16_increment")


def fake_fp8(t: torch.Tensor) -> torch.Tensor:
    """Per-tensor scaled round trip through float8 e4m3 (as fp8 rollout engines do)."""
    amax = t.abs().max().clamp(min=1e-12)
    scale = 448.0 / amax
    return (t * scale).to(torch.float8_e4m3fn).to(torch.float32) / scale


@torch.no_grad()
def sync(sampler: MoEPolicy, learner: MoEPolicy, *, mode: str, step: int) -> None:
    """Copy the learner's weights into the sampler along the path ``mode``."""
    if mode not in SYNC_MODES:
        raise ValueError(f"unknown sync mode {mode!r}; use one of {SYNC_MODES}")
    if mode == "stale":
        return  # the sync silently stopped
    for (name, s), (_, w) in zip(
        sampler.named_parameters(), learner.named_parameters(), strict=True
    ):
        if mode == "exact":
            s.copy_(w)
        elif mode == "bf16":
            s.copy_(w.to(torch.bfloat16).to(torch.float32))
        elif mode == "fp8":
            s.copy_(fake_fp8(w) if w.dim() >= 2 else w)
        elif mode == "partial":
            if ".moe." not in name:  # experts are no longer synced
                s.copy_(w)
        elif mode == "stale_router":
            if ".moe.router." not in name:  # the routers keep the weights they had
                s.copy_(w)
        elif mode == "bf16_increment":
            # the served copy is bf16 and receives the update rounded to nearest in bf16
            s.copy_((s.to(torch.bfloat16) + (w - s).to(torch.bfloat16)).to(torch.float32))
