"""proxydiag lab: real (tiny) MoE RL runs with clustering-pruned proxies and injected faults.

Needs the optional extra ``proxydiag[lab]`` (torch, CPU build). A small MoE transformer is
pre-trained on a toy task, then post-trained with GRPO on a verifiable-reward task with a
sampler/learner split (the sampler has its own copy of the weights and dtype, the learner fp32
master weights), logging veRL's metric names to TensorBoard (and optionally MLflow).
"""

from __future__ import annotations

from proxydiag.errors import MissingExtraError


def require_torch() -> None:
    """Raise a one-line install hint when torch is missing."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as exc:
        raise MissingExtraError("torch", "lab") from exc
