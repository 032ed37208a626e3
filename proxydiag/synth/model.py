"""The metrics of a GRPO/PPO post-training run of an MoE policy, step by step.

Learning advances on a *progress clock*: the learning rate (relative to its peak) summed over
the steps whose update was applied, so skipped steps (overflows, non-finite gradients) stall
learning as they do in a real run. Reward, entropy, response length and KL follow saturating
curves of that clock; every metric carries AR(1) Student-t noise (:mod:`.noise`).
Faults and benign patterns enter only through :class:`~proxydiag.synth.effects.Effects`.
"""

from __future__ import annotations

import numpy as np

from proxydiag.synth.dynamics import Dynamics
from proxydiag.synth.effects import Effects
from proxydiag.synth.loss_scaler import run_scaler
from proxydiag.synth.noise import ar1_t

#: rollout-vs-learner mismatch of a healthy run per precision:
#: (prob diff mean, prob diff max, k3, |log p| diff mean, |log p| diff max, 1 - Pearson). bf16 ≈
#: 0.003 prob diff and fp16 several times less
#: (docs/failures.md#precision-fault-rollout-vs-learner-mismatch).
MISMATCH_BASE = {
    "bf16": (0.003, 0.25, 3e-4, 0.02, 1.5, 7e-4),
    "fp16": (0.0008, 0.08, 3e-5, 0.006, 0.5, 1.5e-4),
}


def learning_rate(dyn: Dynamics, *, n_steps: int) -> np.ndarray:
    """Linear warm-up, then cosine decay to 10% of the peak (or constant)."""
    t = np.arange(1, n_steps + 1, dtype=np.float64)
    warm = np.minimum(1.0, t / dyn.warmup_steps)
    if not dyn.cosine:
        return dyn.lr_peak * warm
    frac = np.clip((t - dyn.warmup_steps) / max(n_steps - dyn.warmup_steps, 1), 0.0, 1.0)
    return dyn.lr_peak * warm * (0.1 + 0.9 * 0.5 * (1.0 + np.cos(np.pi * frac)))


#: share of tokens whose top-k expert set differs between two routers computing the same
#: routing in different precision (bf16 vs fp32 logits): near-ties flip; relative only
ROUTE_CHANGE_BASE = 0.004


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Values rounded to the nearest bf16 number (ties to even), as float64; NaN/inf kept.

    >>> to_bf16(np.array([0.7, 1.0, np.inf])).tolist()
    [0.69921875, 1.0, inf]
    """
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    bits = np.where(finite, x, 0.0).astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(finite, rounded.view(np.float32).astype(np.float64), x)


def simulate_routing(
    dyn: Dynamics, eff: Effects, *, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The routing shares of an MoE run with routing replay: the replayed share (1 but for a
    rare skipped micro-batch, a rollout abort), the share fallen back to the learner's router,
    the share of tokens whose top-k set differs between the rollout's and learner's router."""
    n = len(eff.route_off)
    spread = min(dyn.noise, 1.5)
    blip = np.where(rng.random(n) < 0.03, rng.uniform(0.002, 0.02, n), 0.0)
    off = np.clip(eff.route_off * np.exp(ar1_t(rng, n_steps=n, phi=0.5, scale=0.1)) + blip, 0, 1)
    change = ROUTE_CHANGE_BASE * eff.route_change_mult
    change = change * np.exp(ar1_t(rng, n_steps=n, phi=0.7, scale=0.12 * spread))
    out = {
        "mismatch_route_replay": 1.0 - off,
        "mismatch_route_fallback": off,
        "mismatch_route_change": np.clip(change, 0.0, 1.0),
    }
    return {k: np.where(eff.nan, np.nan, v) for k, v in out.items()}


def simulate_metrics(
    dyn: Dynamics, eff: Effects, *, precision: str, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """All canonical metrics, one value per step (NaN/inf where the run produced them)."""
    n = len(eff.grad_log)
    t = np.arange(1, n + 1, dtype=np.float64)
    lr = learning_rate(dyn, n_steps=n)
    warm = np.log1p(1.5 * np.exp(-t / (0.04 * n)))  # early grad norms are larger
    grad_trend = np.log(dyn.grad0) + warm + eff.grad_log
    grad_norm = np.exp(
        grad_trend + ar1_t(rng, n_steps=n, phi=0.7, scale=dyn.grad_sigma * dyn.noise)
    )
    out: dict[str, np.ndarray] = {"lr": lr}
    overflow = np.zeros(n, dtype=bool)
    if precision == "fp16":
        headroom = (
            dyn.headroom_log2
            - (grad_trend - np.log(dyn.grad0)) / np.log(2.0)
            - eff.headroom_drop
            + ar1_t(rng, n_steps=n, phi=0.5, scale=0.06)
        )
        trace = run_scaler(
            headroom,
            init_scale_log2=dyn.init_scale_log2,
            scale_window_steps=dyn.scale_window_steps,
        )
        overflow = trace.overflow
        out["loss_scale"] = trace.scale
    nonfinite = eff.nonfinite | eff.nan
    skipped = overflow | nonfinite
    progress = np.cumsum(np.where(skipped, 0.0, lr / dyn.lr_peak * eff.learn_gain))
    out.update(_policy(dyn, eff, progress, t, rng))
    out.update(_mismatch(dyn, eff, precision, rng))
    # reduced in bf16 once the master weights are lost (else a full-precision number)
    grad_norm = np.where(eff.grad_bf16, to_bf16(grad_norm), grad_norm)
    grad_norm = np.where(overflow, np.inf, grad_norm)
    bad = rng.random(n) < 0.7
    grad_norm = np.where(eff.nonfinite & ~eff.nan, np.where(bad, np.nan, np.inf), grad_norm)
    out["grad_norm"] = grad_norm
    out["skipped"] = skipped.astype(np.float64)
    out["nonfinite"] = nonfinite.astype(np.float64)
    out.update(_throughput(dyn, out["response_length"], rng))
    for name in ("grad_norm", "pg_loss", "loss", "entropy", "kl", "clip_frac"):
        out[name] = np.where(eff.nan, np.nan, out[name])
    for name in [k for k in out if k.startswith("mismatch")]:
        out[name] = np.where(eff.nan, np.nan, out[name])
    # a policy with NaN weights still gets its (garbage) rollouts scored
    out["reward"] = np.where(eff.nan, np.abs(0.01 * rng.standard_normal(n)), out["reward"])
    return out


def _policy(
    dyn: Dynamics, eff: Effects, progress: np.ndarray, t: np.ndarray, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    n = len(t)
    c, d, s = eff.collapse, eff.drift, dyn.noise

    def noise(phi: float, scale: float) -> np.ndarray:
        return ar1_t(rng, n_steps=n, phi=phi, scale=scale * s)

    learned = 1.0 - np.exp(-progress / dyn.tau_reward)
    reward = dyn.reward0 + (dyn.reward_max - dyn.reward0) * learned
    reward = reward * (1.0 - 0.45 * d) * (1.0 - c) + 0.02 * c
    reward = np.clip(reward + noise(0.6, 0.025), 0.0, 1.0)
    floor = dyn.entropy0 * dyn.entropy_floor
    entropy = floor + (dyn.entropy0 - floor) * np.exp(-progress / dyn.tau_entropy)
    entropy = entropy * (1.0 + 0.1 * np.exp(-t / (0.02 * n))) * (1.0 + 0.6 * d)
    # token NLL of the sampled responses (a policy collapse may leave it alone)
    loss = 0.3 + 0.9 * entropy + (0.0 if eff.quiet_loss else 3.0) * c
    blow = 1.0 + 3.0 * c if eff.entropy_explodes else 1.0 - 0.9 * c
    entropy = entropy * blow * np.exp(noise(0.7, 0.03))
    length = dyn.length0 * (
        1.0 + (dyn.length_growth - 1.0) * (1.0 - np.exp(-progress / dyn.tau_length))
    )
    length = np.minimum(length * (1.0 + 1.5 * c) * np.exp(noise(0.8, 0.04)), 8192.0)
    grown = 1.0 - np.exp(-progress / dyn.tau_kl)
    kl = dyn.kl_max * (0.15 + 0.85 * grown) * (1.0 + 2.0 * d) + 0.8 * c
    kl = kl * np.exp(noise(0.6, 0.12))
    lr_rel = np.diff(progress, prepend=0.0)  # relative update size of each step
    clip = dyn.clip0 * (0.6 + 0.4 * lr_rel) * (1.0 + 0.5 * grown) + 0.01 * d + 0.25 * c
    clip = clip * np.exp(noise(0.5, 0.2))
    pg_loss = -0.003 + noise(0.3, 0.015) * (
        1.0 + (1.0 if eff.quiet_loss else 10.0) * c + eff.loss_spike
    )
    loss = loss + noise(0.7, 0.02) * (1.0 + eff.loss_spike)
    return {
        "reward": reward,
        "entropy": entropy,
        "loss": loss,
        "response_length": length,
        "kl": kl,
        "clip_frac": np.clip(clip, 0.0, 1.0),
        "pg_loss": pg_loss,
    }


def _mismatch(
    dyn: Dynamics, eff: Effects, precision: str, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    n = len(eff.mismatch_mult)
    m = eff.mismatch_mult
    pd0, pdmax0, k30, lpd0, lpdmax0, corr_gap0 = MISMATCH_BASE[precision]

    # the mismatch is a property of the sampler/learner numerics, not of the training
    # dynamics: a volatile run's extra noise reaches it only in part
    spread = min(dyn.noise, 1.5)

    def wobble(phi: float, scale: float) -> np.ndarray:
        return np.asarray(np.exp(ar1_t(rng, n_steps=n, phi=phi, scale=scale * spread)))

    k3 = k30 * m**2 * wobble(0.7, 0.12)
    return {
        "mismatch_prob_diff": pd0 * m * wobble(0.8, 0.08),
        "mismatch_prob_diff_max": np.minimum(0.99, pdmax0 * m**0.6 * wobble(0.3, 0.15)),
        "mismatch_k3": k3,
        # an estimate's sampling noise, none where the two sides agree bit for bit (m = 0)
        "mismatch_kl": 0.9 * k3
        + np.where(m > 0, k30 * 0.3 * ar1_t(rng, n_steps=n, phi=0.5, scale=1.0), 0.0),
        "mismatch_logp_diff": lpd0 * m * wobble(0.8, 0.08),
        "mismatch_logp_diff_max": lpdmax0 * m**0.6 * wobble(0.3, 0.15),
        "mismatch_corr": np.maximum(-1.0, 1.0 - corr_gap0 * m**3 * wobble(0.7, 0.1)),
    }


def _throughput(
    dyn: Dynamics, length: np.ndarray, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    n = len(length)
    finite_len = np.where(np.isfinite(length), length, dyn.length0)
    step_time = dyn.step_time_s * (finite_len / dyn.length0) ** 0.6
    step_time = step_time * np.exp(ar1_t(rng, n_steps=n, phi=0.8, scale=0.03))
    tokens_step = dyn.batch_size * finite_len
    return {
        "step_time": step_time,
        "throughput": tokens_step / step_time / dyn.n_gpus,
        "tokens": np.cumsum(np.round(tokens_step)),
        "samples": dyn.batch_size * np.arange(1, n + 1, dtype=np.float64),
    }
