"""GRPO post-training with a sampler/learner split (the vLLM/SGLang + FSDP/Megatron shape).

Each step: sync the learner's weights into the sampler (through the configured path), the
sampler generates ``group_size`` responses per prompt with its own weights and dtype, rewards
are group-normalised into advantages, and the fp32 learner takes one PPO-clip step. The old
log-probs in the importance ratio are the *sampler's* (as stacks that skip the recompute do),
so a rollout/learner mismatch biases the update — which is how precision faults hurt training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from proxydiag.lab.amp_scaler import LossScaler
from proxydiag.lab.injection import FaultSpec
from proxydiag.lab.model import MoEPolicy
from proxydiag.lab.precision import sync
from proxydiag.lab.rollout import generate, mismatch_metrics, response_logits, token_logp
from proxydiag.lab.sink import MetricSink
from proxydiag.lab.task import prompts, reward


@dataclass(frozen=True)
class GRPOConfig:
    steps: int = 150
    prompts_per_step: int = 16
    group_size: int = 8
    lr: float = 3e-4
    warmup_steps: int = 10
    clip_eps: float = 0.2
    grad_clip: float = 1.0
    precision: str = "fp32"  # learner gradients: fp32 | fp16 (with a dynamic loss scaler)
    fault: FaultSpec = field(default_factory=FaultSpec)
    seed: int = 0


#: the entropy bonus of the ``policy_collapse`` fault (veRL's entropy_coeff is 0 or 0.001 by
#: default; here 0.05 and 0.5 still let learning win, 2.0 collapses the policy in ~20 steps)
ENTROPY_COEF_FAULT = 2.0


def _lr(cfg: GRPOConfig, step: int) -> float:
    lr = cfg.lr * min(1.0, (step + 1) / max(cfg.warmup_steps, 1))
    if cfg.fault.name == "lr_blowup" and cfg.fault.active(step):
        lr *= 40.0
    return lr


def train(learner: MoEPolicy, sampler: MoEPolicy, cfg: GRPOConfig, sink: MetricSink) -> None:
    """Post-train ``learner`` in place, logging veRL-named metrics every step."""
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.Adam(learner.parameters(), lr=cfg.lr)
    params = [p for p in learner.parameters() if p.requires_grad]
    scaler = LossScaler() if cfg.precision == "fp16" else None
    sync(sampler, learner, mode="exact", step=0)
    for step in range(cfg.steps):
        t0 = time.perf_counter()
        if scaler is not None and cfg.fault.name == "fp16_static_scale" and cfg.fault.active(step):
            scaler.dynamic, scaler.scale = False, 2.0**24
        if step > 0:
            sync(sampler, learner, mode=cfg.fault.sync_mode(step), step=step)
        prompt = prompts(cfg.prompts_per_step, gen=gen).repeat_interleave(cfg.group_size, dim=0)
        ro = generate(sampler, prompt, gen=gen, bf16=cfg.fault.sampler_bf16(step))
        r = reward(prompt, ro.tokens[:, prompt.shape[1] :])
        grouped = r.view(-1, cfg.group_size)
        adv = (
            (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)
        ).view(-1, 1)
        logits = response_logits(learner, ro.tokens)
        logp = token_logp(logits, ro.tokens)
        ratio = (logp - ro.logp).exp()
        clipped = ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps)
        per_tok = -torch.minimum(ratio * adv, clipped * adv)
        denom = ro.mask.sum().clamp(min=1)
        loss = (per_tok * ro.mask).sum() / denom
        objective = loss
        if cfg.fault.name == "policy_collapse" and cfg.fault.active(step):
            # an entropy bonus far too strong (veRL's entropy_coeff; pg_loss is logged
            # without it, as veRL does): the policy is pushed towards uniform
            p_all = logits.softmax(-1)
            ent = -(p_all * p_all.clamp(min=1e-30).log()).sum(-1)
            objective = loss - ENTROPY_COEF_FAULT * (ent * ro.mask).sum() / denom
        opt.zero_grad(set_to_none=True)
        objective.backward()
        skipped = 0.0
        if scaler is not None:
            overflow = not scaler.unscale_fp16(params)
            scaler.update(overflow=overflow)
            skipped = float(overflow)
        clip = (
            cfg.grad_clip if not (cfg.fault.name == "lr_blowup" and cfg.fault.active(step)) else 1e9
        )
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip, error_if_nonfinite=False))
        if skipped == 0.0 and torch.isfinite(torch.tensor(grad_norm)):
            for group in opt.param_groups:
                group["lr"] = _lr(cfg, step)
            opt.step()
        with torch.no_grad():
            probs = logits.softmax(-1)
            entropy = -(probs * probs.clamp(min=1e-30).log()).sum(-1)
            m = ro.mask
            metrics = {
                "actor/pg_loss": float(loss),
                "actor/grad_norm": grad_norm,
                "actor/entropy": float((entropy * m).sum() / denom),
                "critic/score/mean": float(r.mean()),
                "response_length/mean": float(m.sum(1).mean()),
                "actor/ppo_kl": float(((ro.logp - logp) * m).sum() / denom),
                "actor/pg_clipfrac": float(
                    (((ratio - 1).abs() > cfg.clip_eps).float() * m).sum() / denom
                ),
                "actor/lr": _lr(cfg, step),
                **mismatch_metrics(logp.detach(), ro.logp, m),
                "perf/time_per_step": time.perf_counter() - t0,
            }
            if scaler is not None:
                metrics["actor/loss_scale"] = scaler.scale
                metrics["actor/skipped"] = skipped
        sink.log(step, metrics)
