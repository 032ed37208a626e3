"""GRPO post-training with a sampler/learner split (the vLLM/SGLang + FSDP/Megatron shape).

Each step: sync the learner's weights into the sampler (through the configured path), the
sampler generates ``group_size`` responses per prompt with its own weights and dtype, rewards
are group-normalised into advantages, and the fp32 learner takes one PPO-clip step. The old
log-probs in the importance ratio are the *sampler's* (as stacks that skip the recompute do),
so a rollout/learner mismatch biases the update — which is how precision faults hurt training.

With ``replay`` the rollout engine computes in bf16 (as serving engines do) and returns the
experts it routed every token to, and the learner's forward routes on them (routing replay,
R3); every run logs the routing comparison between the sampler's and the learner's routers.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from proxydiag.lab.amp_scaler import LossScaler
from proxydiag.lab.injection import FaultSpec
from proxydiag.lab.model import MoEPolicy
from proxydiag.lab.precision import sync
from proxydiag.lab.rollout import (
    generate,
    mismatch_metrics,
    replayed,
    response_logits,
    route_metrics,
    token_logp,
)
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
    #: routing replay (R3) with a bf16 rollout engine (``replay_off`` runs replay until the
    #: fault)
    replay: bool = False

    @property
    def replays(self) -> bool:
        return self.replay or self.fault.name == "replay_off"


#: the entropy bonus of the ``policy_collapse`` fault (veRL's entropy_coeff is 0 or 0.001 by
#: default; here 0.05 and 0.5 still let learning win, 2.0 collapses the policy in ~20 steps)
ENTROPY_COEF_FAULT = 2.0


def _lr(cfg: GRPOConfig, step: int) -> float:
    lr = cfg.lr * min(1.0, (step + 1) / max(cfg.warmup_steps, 1))
    if cfg.fault.name == "lr_blowup" and cfg.fault.active(step):
        lr *= 40.0
    return lr


#: steps a ``lost_master_weights`` run trains past its fault-step checkpoint before the job
#: dies and resumes from it (those steps are logged again, as a resumed job does)
CRASH_AFTER = 5


def _checkpoint(learner: MoEPolicy, sampler: MoEPolicy, opt: Any, gen: Any) -> dict[str, Any]:
    return {
        "learner": copy.deepcopy(learner.state_dict()),
        "sampler": copy.deepcopy(sampler.state_dict()),
        "opt": copy.deepcopy(opt.state_dict()),
        "gen": gen.get_state(),
    }


@torch.no_grad()
def _resume_bf16(
    ckpt: dict[str, Any], learner: MoEPolicy, sampler: MoEPolicy, opt: Any, gen: Any
) -> None:
    """Resume from ``ckpt`` as a checkpoint that kept only bf16 weights: the learner's
    parameters come back rounded to bf16 (the fp32 master copy is gone)."""
    learner.load_state_dict(
        {
            k: v.to(torch.bfloat16).to(v.dtype) if v.is_floating_point() else v
            for k, v in ckpt["learner"].items()
        }
    )
    sampler.load_state_dict(ckpt["sampler"])
    opt.load_state_dict(ckpt["opt"])
    gen.set_state(ckpt["gen"])


def _bf16_grads(params: list[torch.nn.Parameter], clip: float) -> float:
    """Pure-bf16 gradients: each gradient rounded to bf16, the global norm reduced in bf16
    (a bf16 number), clipping applied with it. Returns the norm."""
    grads = [p.grad.to(torch.bfloat16) for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, error_if_nonfinite=False)
    coef = (clip / (norm.float() + 1e-6)).clamp(max=1.0)
    for p, g in zip((p for p in params if p.grad is not None), grads, strict=True):
        p.grad = g.float() * coef
    return float(norm)


@torch.no_grad()
def _round_bf16(params: list[torch.nn.Parameter]) -> None:
    """Keep the parameters in bf16: what an update below half a bf16 ulp did is rounded away."""
    for p in params:
        p.copy_(p.to(torch.bfloat16).to(p.dtype))


def train(learner: MoEPolicy, sampler: MoEPolicy, cfg: GRPOConfig, sink: MetricSink) -> None:
    """Post-train ``learner`` in place, logging veRL-named metrics every step."""
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.Adam(learner.parameters(), lr=cfg.lr)
    params = [p for p in learner.parameters() if p.requires_grad]
    scaler = LossScaler() if cfg.precision == "fp16" else None
    sync(sampler, learner, mode="exact", step=0)
    fault = cfg.fault
    crash_at = min(fault.start_step + CRASH_AFTER, cfg.steps - 1)
    ckpt: dict[str, Any] | None = None
    pure_bf16 = False
    step = 0
    while step < cfg.steps:
        if fault.lost_master_weights() and not pure_bf16:
            if step == fault.start_step:
                ckpt = _checkpoint(learner, sampler, opt, gen)
            if ckpt is not None and step == crash_at:
                # the job died: resume from the fault-step checkpoint, which kept bf16 weights
                _resume_bf16(ckpt, learner, sampler, opt, gen)
                step, ckpt, pure_bf16 = fault.start_step, None, True
        t0 = time.perf_counter()
        if scaler is not None and fault.name == "fp16_static_scale" and fault.active(step):
            scaler.dynamic, scaler.scale = False, 2.0**24
        if step > 0:
            sync(sampler, learner, mode=fault.sync_mode(step), step=step)
        prompt = prompts(cfg.prompts_per_step, gen=gen).repeat_interleave(cfg.group_size, dim=0)
        sampler_bf16 = fault.sampler_bf16(step) or cfg.replays
        ro = generate(sampler, prompt, gen=gen, bf16=sampler_bf16, record_routes=cfg.replays)
        r = reward(prompt, ro.tokens[:, prompt.shape[1] :])
        grouped = r.view(-1, cfg.group_size)
        adv = (
            (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)
        ).view(-1, 1)
        with replayed(learner, None if fault.replay_off(step) else ro.routes):
            logits = response_logits(learner, ro.tokens)
        # both routers as they were for this rollout: before the learner's update
        routing = route_metrics(sampler, learner, ro.mask, bf16=sampler_bf16)
        if cfg.replays:
            moes = learner.moes()
            routing["r3/replay_fraction_active"] = sum(x.replayed for x in moes) / len(moes)
        logp = token_logp(logits, ro.tokens)
        ratio = (logp - ro.logp).exp()
        clipped = ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps)
        per_tok = -torch.minimum(ratio * adv, clipped * adv)
        denom = ro.mask.sum().clamp(min=1)
        loss = (per_tok * ro.mask).sum() / denom
        objective = loss
        if fault.name == "policy_collapse" and fault.active(step):
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
        clip = cfg.grad_clip if not (fault.name == "lr_blowup" and fault.active(step)) else 1e9
        if pure_bf16:
            grad_norm = _bf16_grads(params, clip)
        else:
            grad_norm = float(
                torch.nn.utils.clip_grad_norm_(params, clip, error_if_nonfinite=False)
            )
        if skipped == 0.0 and torch.isfinite(torch.tensor(grad_norm)):
            for group in opt.param_groups:
                group["lr"] = _lr(cfg, step)
            opt.step()
            if pure_bf16:
                _round_bf16(params)
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
                **routing,
                "perf/time_per_step": time.perf_counter() - t0,
            }
            if scaler is not None:
                metrics["actor/loss_scale"] = scaler.scale
                metrics["actor/skipped"] = skipped
        sink.log(step, metrics)
        step += 1
