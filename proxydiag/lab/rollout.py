"""Group rollouts from the sampler and the learner's view of the same tokens."""

from __future__ import annotations

from contextlib import nullcontext
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


@torch.no_grad()
def generate(
    sampler: MoEPolicy, prompt: torch.Tensor, *, gen: torch.Generator, bf16: bool
) -> Rollout:
    """Sample ``ANSWER_LEN`` tokens per prompt at temperature 1 from the sampler."""
    tokens = prompt
    logps = []
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext()
    for _ in range(ANSWER_LEN):
        with ctx:
            logits = sampler(tokens)[:, -1].float()
        logp_all = F.log_softmax(logits, dim=-1)
        nxt = torch.multinomial(logp_all.exp(), 1, generator=gen)
        logps.append(logp_all.gather(1, nxt))
        tokens = torch.cat([tokens, nxt], dim=1)
    response = tokens[:, PROMPT_LEN:]
    is_eos = (response == EOS).int()
    after_eos = (is_eos.cumsum(dim=1) - is_eos) > 0
    return Rollout(tokens, torch.cat(logps, dim=1), (~after_eos).float())


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
