"""Expert-pruned proxies of Hugging Face MoE checkpoints (``proxydiag proxy build``).

Per MoE layer, a share of the routed experts is kept — by structure-preserving clustering
(default), routing frequency or REAP saliency — with the backbone, shared experts and router
(re-indexed) kept whole. Weights are streamed tensor by tensor; see docs/proxy.md.
"""

from __future__ import annotations

from proxydiag.proxy.build import build
from proxydiag.proxy.result import ProxyResult
from proxydiag.proxy.select import METHODS

__all__ = ["METHODS", "ProxyResult", "build"]
