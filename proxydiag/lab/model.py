"""A tiny MoE transformer policy: causal attention + top-k routed expert FFNs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from proxydiag.lab.task import ANSWER_LEN, PROMPT_LEN, VOCAB


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = VOCAB
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    n_experts: int = 8
    top_k: int = 2
    d_expert: int = 128
    max_len: int = PROMPT_LEN + ANSWER_LEN

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class MoE(nn.Module):
    """Top-k routed experts; the router is a linear layer over the experts kept.

    ``replay`` (top-k expert indices, one row per token of the next forward) makes the layer
    route on those instead of its own router's choice, weighting them with its own gates
    (routing replay, R3: the learner reuses the rollout engine's routing). Each forward keeps
    its input rows and the experts it routed to (``seen``, ``routed``) for the routing
    comparison and for recording a rollout's routing, and whether it replayed (``replayed``)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.top_k = cfg.top_k
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(cfg.n_experts, cfg.d_model, cfg.d_expert) * 0.05)
        self.w_out = nn.Parameter(torch.randn(cfg.n_experts, cfg.d_expert, cfg.d_model) * 0.05)
        self.replay: torch.Tensor | None = None
        self.seen: torch.Tensor | None = None
        self.routed: torch.Tensor | None = None
        self.replayed = False

    @property
    def n_experts(self) -> int:
        return int(self.w_in.shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        flat = x.reshape(b * t, d)
        k = min(self.top_k, self.n_experts)
        gates = F.softmax(self.router(flat), dim=-1)
        if self.replay is not None:
            top_i = self.replay
            top_w = gates.gather(1, top_i)
        else:
            top_w, top_i = gates.topk(k, dim=-1)
        self.seen, self.routed = flat.detach(), top_i.detach()
        self.replayed = self.replay is not None
        top_w = top_w / top_w.sum(dim=-1, keepdim=True)
        # every expert on every token, then pick the top-k: with 8 tiny experts this is ~8x
        # cheaper than gathering a weight copy per token and slot
        h = F.gelu(torch.einsum("nd,xde->nxe", flat, self.w_in))
        y = torch.einsum("nxe,xed->nxd", h, self.w_out)
        picked = y.gather(1, top_i[:, :, None].expand(-1, -1, d))
        return (picked * top_w[:, :, None]).sum(1).reshape(b, t, d)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.moe = MoE(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        shape = (b, t, self.n_heads, d // self.n_heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return cast(torch.Tensor, x + self.moe(self.ln2(x)))


class MoEPolicy(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Parameter(torch.randn(cfg.max_len, cfg.d_model) * 0.02)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return cast(torch.Tensor, self.head(self.ln_f(x)))

    def moes(self) -> list[MoE]:
        """The MoE layer of each block."""
        return [cast(Block, block).moe for block in self.blocks]

    def n_experts(self) -> int:
        return self.moes()[0].n_experts

    def active_params_per_token(self) -> int:
        """Parameters touched per token (the cost that expert pruning cuts)."""
        total = sum(p.numel() for n, p in self.named_parameters() if ".moe.w_" not in n)
        for moe in self.moes():
            per_expert = moe.w_in[0].numel() + moe.w_out[0].numel()
            total += per_expert * min(moe.top_k, moe.n_experts)
        return int(total)

    def total_params(self) -> int:
        return int(sum(p.numel() for p in self.parameters()))
