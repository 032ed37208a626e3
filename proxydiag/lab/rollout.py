"""Group rollouts from the sampler and the learner's view of the same tokens."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from proxydiag.lab.model import MoEPolicy
from proxydiag.lab.task import ANSWER_LEN, EOS, PROMPT_LEN


@dataclass
class Rollout:
    tokens: torch.Tensor  # (n, PROMPT_LEN + ANSWER_LEN)
    logp: torch.Tensor  # sampler log-probs of the response tokens (n, ANSWER_LEN)
    mask: torch.Tensor  # response tokens up to and including EOS
    #: per MoE layer, the experts the sampler routed each token to while generating, shape
    #: (n, PROMPT_LEN + ANSWER_LEN - 1, top_k): what a learner's forward over ``tokens[:, :-1]``
    #: replays (None when not recorded)
    routes: list[torch.Tensor] | None = None


def _precision(bf16: bool) -> AbstractContextManager[object]:
    return torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext()


@torch.no_grad()
def generate(
    sampler: MoEPolicy,
    prompt: torch.Tensor,
    *,
    gen: torch.Generator,
    bf16: bool,
    record_routes: bool = False,
) -> Rollout:
    """Sample ``ANSWER_LEN`` tokens per prompt at temperature 1 from the sampler (with
    ``record_routes``, keep the experts it routed every token to, as an engine returning its
    routed experts for replay does)."""
    tokens = prompt
    logps = []
    ctx = _precision(bf16)
    routes: list[list[torch.Tensor]] | None = (
        [[] for _ in sampler.moes()] if record_routes else None
    )
    for i in range(ANSWER_LEN):
        with ctx:
            logits = sampler(tokens)[:, -1].float()
        if routes is not None:
            for kept, moe in zip(routes, sampler.moes(), strict=True):
                assert moe.routed is not None
                got = moe.routed.view(tokens.shape[0], tokens.shape[1], -1)
                kept.append(got if i == 0 else got[:, -1:])  # the prompt once, then each new token
        logp_all = F.log_softmax(logits, dim=-1)
        nxt = torch.multinomial(logp_all.exp(), 1, generator=gen)
        logps.append(logp_all.gather(1, nxt))
        tokens = torch.cat([tokens, nxt], dim=1)
    response = tokens[:, PROMPT_LEN:]
    is_eos = (response == EOS).int()
    after_eos = (is_eos.cumsum(dim=1) - is_eos) > 0
    return Rollout(
        tokens,
        torch.cat(logps, dim=1),
        (~after_eos).float(),
        None if routes is None else [torch.cat(r, dim=1) for r in routes],
    )


@contextmanager
def replayed(policy: MoEPolicy, routes: list[torch.Tensor] | None) -> Iterator[None]:
    """Within the block, ``policy``'s MoE layers route on ``routes`` (a rollout's recorded
    routing, :attr:`Rollout.routes`) instead of their own routers: routing replay (R3)."""
    if routes is None:
        yield
        return
    for moe, r in zip(policy.moes(), routes, strict=True):
        moe.replay = r.reshape(-1, r.shape[-1])
    try:
        yield
    finally:
        for moe in policy.moes():
            moe.replay = None


@torch.no_grad()
def route_metrics(
    sampler: MoEPolicy, learner: MoEPolicy, mask: torch.Tensor, *, bf16: bool
) -> dict[str, float]:
    """The routing comparison marin logs (``train/router/compare_current_*_fraction``), over
    the response tokens and MoE layers of the learner's last forward: the share of token
    routes whose top-k expert set (and whose ordered top-k list) differs between the
    sampler's router, in the sampler's precision, and the learner's router, both run on the
    learner's hidden states (so only the routers differ, not what flows into them)."""
    m = mask.bool()
    n = mask.shape[0]
    changed_set = changed_order = total = 0
    for s_moe, l_moe in zip(sampler.moes(), learner.moes(), strict=True):
        assert l_moe.seen is not None
        x = l_moe.seen.view(n, -1, l_moe.seen.shape[-1])[:, PROMPT_LEN - 1 :][m]
        k = min(l_moe.top_k, l_moe.n_experts)
        mine = l_moe.router(x).topk(k, dim=-1).indices
        with _precision(bf16):
            theirs = s_moe.router(x).float().topk(k, dim=-1).indices
        changed_order += int((mine != theirs).any(-1).sum())
        changed_set += int((mine.sort(-1).values != theirs.sort(-1).values).any(-1).sum())
        total += int(x.shape[0])
    return {
        "router/compare_current_set_change_fraction": changed_set / max(total, 1),
        "router/compare_current_order_change_fraction": changed_order / max(total, 1),
    }


def response_logits(policy: MoEPolicy, tokens: torch.Tensor) -> torch.Tensor:
    """Logits that predicted each response token, shape (n, ANSWER_LEN, vocab)."""
    logits: torch.Tensor = policy(tokens[:, :-1])
    return logits[:, PROMPT_LEN - 1 :]


def token_logp(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    resp = tokens[:, PROMPT_LEN:]
    return F.log_softmax(logits, dim=-1).gather(2, resp.unsqueeze(-1)).squeeze(-1)


def mismatch_metrics(
    learner_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """veRL's rollout-vs-learner debug metrics (verl/utils/debug/metrics.py,
    trainer/ppo/rollout_corr_helper.py) over response tokens."""
    m = mask.bool()
    p_l, p_r = learner_logp[m].exp(), rollout_logp[m].exp()
    diff = (p_l - p_r).abs()
    log_ratio = learner_logp[m] - rollout_logp[m]  # log(pi_learner / pi_rollout)
    rho = log_ratio.exp()
    if p_l.numel() > 1 and p_l.std() > 0 and p_r.std() > 0:
        corr = float(torch.corrcoef(torch.stack([p_l, p_r]))[0, 1])
    else:
        corr = float("nan")
    return {
        "training/rollout_probs_diff_mean": float(diff.mean()),
        "training/rollout_probs_diff_max": float(diff.max()),
        "training/rollout_actor_probs_pearson_corr": corr,
        "rollout_corr/kl": float((-log_ratio).mean()),
        "rollout_corr/k3_kl": float((rho - log_ratio - 1).mean()),
    }
