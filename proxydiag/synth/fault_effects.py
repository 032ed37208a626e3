"""Injected faults: each variant adds its symptoms to an :class:`Effects` from its onset on.

The onset is where the root cause begins (docs/architecture.md#json-contracts): the first
overflowing or non-finite step, the first step of grad-norm growth, the mismatch jump, or the first
step of a mismatch climb (not where it crosses a threshold).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from proxydiag.synth.effects import Effects, since
from proxydiag.synth.scenario import FaultSpec

Injector = Callable[[Effects, FaultSpec, np.random.Generator], None]


def inject(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    """Add ``fault``'s symptoms to ``eff`` (in place)."""
    INJECTORS[fault.variant](eff, fault, rng)


def _scaler_collapse(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the fp16 range is exceeded on every step from the onset: the headroom falls far below
    # the minimum scale within a few steps, so the scaler halves to its floor and stays there
    dt = since(len(eff.grad_log), fault.onset_step)
    ramp = float(rng.integers(2, 6))
    eff.headroom_drop += np.where(dt >= 0, 24.0 * np.minimum(1.0, (dt + 1.0) / ramp), 0.0)


def _nonfinite(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    dt = since(len(eff.grad_log), fault.onset_step)
    p_bad = np.where(dt >= 0, 0.55 + 0.4 * np.minimum(1.0, dt / 20.0), 0.0)
    mask = rng.random(len(dt)) < p_bad
    mask[fault.onset_step - 1] = True
    eff.nonfinite |= mask


def _divergence(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    n = len(eff.grad_log)
    dt = since(n, fault.onset_step)
    after = dt >= 0
    kick = np.log(rng.uniform(3.0, 6.0)) * (1.0 - np.exp(-np.maximum(dt, 0.0) / rng.uniform(3, 8)))
    growth = np.log(rng.uniform(30.0, 300.0)) / max(n - fault.onset_step, 1) * np.maximum(dt, 0)
    eff.grad_log += np.where(after, kick + growth, 0.0)
    lag = rng.uniform(8.0, 25.0)
    sev = 1.0 - np.exp(-np.maximum(dt - lag, 0.0) / rng.uniform(10.0, 30.0))
    eff.collapse = np.maximum(eff.collapse, sev)
    eff.mismatch_mult *= 1.0 + 2.0 * sev  # a broken policy also disagrees with its sampler
    eff.entropy_explodes = bool(rng.random() < 0.5)
    if fault.nan_after_steps is not None:
        eff.nan |= dt >= fault.nan_after_steps


def _policy_collapse(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the policy breaks over tens of steps from the onset: reward falls, entropy explodes (or
    # collapses), KL and clip fraction climb, the grad norm rises a few-fold, the losses stay
    # small (no spike for a loss rule to see)
    dt = since(len(eff.grad_log), fault.onset_step)
    sev = rng.uniform(0.7, 0.95) * (1.0 - np.exp(-np.maximum(dt, 0.0) / rng.uniform(6.0, 25.0)))
    sev = np.where(dt >= 0, sev, 0.0)
    eff.collapse = np.maximum(eff.collapse, sev)
    eff.grad_log += np.log(rng.uniform(2.0, 3.5)) * sev
    eff.entropy_explodes = bool(rng.random() < 0.7)
    eff.quiet_loss = True


def _slow_drift(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    n = len(eff.grad_log)
    frac = np.clip(since(n, fault.onset_step) / max(n - fault.onset_step, 1), 0.0, 1.0)
    eff.grad_log += np.log(rng.uniform(5.0, 10.0)) * frac
    eff.drift = np.maximum(eff.drift, frac)


def _sync_step(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    after = since(len(eff.grad_log), fault.onset_step) >= 0
    eff.mismatch_mult *= np.where(after, rng.uniform(4.0, 8.0), 1.0)
    eff.learn_gain *= np.where(after, 0.5, 1.0)  # the sampler serves a stale policy
    eff.grad_log += np.where(after, np.log(1.2), 0.0)


def _climb(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> float:
    """A mismatch climb from the onset; returns its length in steps."""
    n = len(eff.grad_log)
    length = rng.uniform(0.15, 0.3) * n
    frac = np.clip(since(n, fault.onset_step) / length, 0.0, 1.0)
    eff.mismatch_mult *= 1.0 + (rng.uniform(5.0, 10.0) - 1.0) * frac
    eff.learn_gain *= 1.0 - 0.5 * frac
    return float(length)


def _gradual_climb(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    _climb(eff, fault, rng)


def _climb_then_divergence(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    length = _climb(eff, fault, rng)
    tip = fault.onset_step + int(length * rng.uniform(0.6, 0.9))
    if tip < len(eff.grad_log) - 10:
        nan_after = fault.nan_after_steps
        _divergence(eff, FaultSpec("divergence", tip, nan_after), rng)


def _export_lag(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the served weights trail the learner from the onset (round-to-nearest bf16 drops the
    # small updates) and catch up when they have accumulated: a bump that comes back
    dt = since(len(eff.grad_log), fault.onset_step)
    span = rng.uniform(60.0, 150.0)
    inside = (dt >= 0) & (dt < span)
    shape = np.where(inside, np.sin(np.pi * np.clip(dt, 0.0, None) / span), 0.0)
    eff.mismatch_mult *= 1.0 + (rng.uniform(5.0, 9.0) - 1.0) * shape


def _sync_sawtooth(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the sampler is refreshed only every ``period`` steps: the mismatch grows as the learner
    # moves away from the served copy and drops back at each sync
    dt = since(len(eff.grad_log), fault.onset_step)
    period = float(rng.integers(20, 41))
    phase = np.where(dt >= 0, np.mod(np.clip(dt, 0.0, None), period) / period, 0.0)
    eff.mismatch_mult *= 1.0 + (rng.uniform(5.0, 9.0) - 1.0) * phase
    eff.learn_gain *= np.where(dt >= 0, 0.8, 1.0)


def _routing_replay_off(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # replay silently stops for part of the routes (samples without routed experts, a fused
    # router path): the learner routes those tokens itself and the probabilities disagree
    # more (AReaL R3, Moonlight-16B: k3 25x without replay, |d log p| 5x)
    dt = since(len(eff.grad_log), fault.onset_step)
    share = rng.uniform(0.2, 0.8) * np.clip((dt + 1.0) / rng.uniform(1.0, 4.0), 0.0, 1.0)
    off = np.where(dt >= 0, share, 0.0)
    eff.route_off = np.maximum(eff.route_off, off)
    eff.mismatch_mult *= 1.0 + (rng.uniform(3.0, 6.0) - 1.0) * off / max(float(off.max()), 1e-9)
    eff.learn_gain *= np.where(dt >= 0, 0.85, 1.0)


def _routing_mismatch(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the rollout's router drifts from the learner's (stale or lower-precision router weights):
    # the share of tokens whose top-k set differs climbs, the token mismatch follows in part;
    # half the time the run later tips into divergence (the routing signal leads it)
    n = len(eff.grad_log)
    length = rng.uniform(0.15, 0.3) * n
    frac = np.clip(since(n, fault.onset_step) / length, 0.0, 1.0)
    eff.route_change_mult *= 1.0 + (rng.uniform(6.0, 12.0) - 1.0) * frac
    eff.mismatch_mult *= 1.0 + (rng.uniform(1.5, 2.5) - 1.0) * frac
    eff.learn_gain *= 1.0 - 0.3 * frac
    if rng.random() < 0.5:
        tip = fault.onset_step + int(length * rng.uniform(0.8, 1.2))
        if tip < n - 10:
            _divergence(eff, FaultSpec("divergence", tip, None), rng)


def _from_start(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the sampler computes differently from the learner from the first step (a quantized or
    # fp8 rollout, a recipe or scale mismatch): the disagreement is 5-12x a healthy bf16
    # pair's from step 1, beyond the published bound of a probability difference or a Pearson
    # correlation, and stays there
    after = since(len(eff.grad_log), fault.onset_step) >= 0
    eff.mismatch_mult *= np.where(after, rng.uniform(5.0, 12.0), 1.0)
    eff.learn_gain *= np.where(after, 0.8, 1.0)


def _on_policy_nonzero(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # a true on-policy setup (the same engine and kernels for sampling and training) logs a
    # mismatch of exactly 0 until something breaks it (a kernel change, a non-deterministic
    # reduction, a sampler update path): from the onset the sampler and learner disagree by
    # 0.3-3x a healthy bf16 pair, within the ranges a bounded stack would accept
    after = since(len(eff.grad_log), fault.onset_step) >= 0
    eff.mismatch_mult *= np.where(after, rng.uniform(0.3, 3.0), 0.0)


def _resume_shift(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the run crashed and resumed from the checkpoint of step onset - 1; the resumed sampler
    # or learner lost state (the fp32 master weights, the sampler's weight copy): from the
    # resume on the disagreement stands 3-6x higher (the superseded steps, logged before the
    # crash, keep the level before: see proxydiag.synth.view)
    after = since(len(eff.grad_log), fault.onset_step) >= 0
    eff.mismatch_mult *= np.where(after, rng.uniform(3.0, 6.0), 1.0)


def _lost_master_weights(eff: Effects, fault: FaultSpec, rng: np.random.Generator) -> None:
    # the learner keeps only bf16 weights from the onset (a resume that restored the bf16
    # copy, a wrapper that dropped the fp32 one): its grad norm is reduced in bf16 and
    # updates below half a bf16 ulp vanish, so learning slows
    after = since(len(eff.grad_log), fault.onset_step) >= 0
    eff.grad_bf16 |= after
    eff.learn_gain *= np.where(after, rng.uniform(0.3, 0.6), 1.0)


INJECTORS: dict[str, Injector] = {
    "fp16_scaler_collapse": _scaler_collapse,
    "bf16_nonfinite": _nonfinite,
    "divergence": _divergence,
    "slow_drift": _slow_drift,
    "policy_collapse": _policy_collapse,
    "sync_step": _sync_step,
    "gradual_climb": _gradual_climb,
    "climb_then_divergence": _climb_then_divergence,
    "export_lag": _export_lag,
    "sync_sawtooth": _sync_sawtooth,
    "routing_replay_off": _routing_replay_off,
    "routing_mismatch": _routing_mismatch,
    "lost_master_weights": _lost_master_weights,
    "from_start": _from_start,
    "on_policy_nonzero": _on_policy_nonzero,
    "resume_shift": _resume_shift,
}
