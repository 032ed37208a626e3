"""`Dynamics`: the parameters of a run's underlying training dynamics.

Every run of a group (full seeds and proxies) starts from the same draw
(:func:`draw_dynamics` with the group's seed); proxies then shift it systematically
(:mod:`proxydiag.synth.proxy`), seeds only change the noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dynamics:
    """Shared parameters of a GRPO/PPO run of an MoE policy. Time constants are in steps."""

    lr_peak: float
    warmup_steps: int
    cosine: bool
    reward0: float
    reward_max: float
    tau_reward: float
    entropy0: float
    entropy_floor: float
    tau_entropy: float
    length0: float
    length_growth: float
    tau_length: float
    kl_max: float
    tau_kl: float
    clip0: float
    grad0: float
    grad_sigma: float
    #: multiplies the spread of every metric's noise
    noise: float
    headroom_log2: float
    init_scale_log2: int
    scale_window_steps: int
    batch_size: int
    step_time_s: float
    n_gpus: int


def draw_dynamics(group_seed: int, *, n_steps: int) -> Dynamics:
    """Draw a group's dynamics; the same seed and length give the same parameters.

    >>> a, b = draw_dynamics(3, n_steps=500), draw_dynamics(3, n_steps=500)
    >>> a == b, 0.0 < a.reward0 < a.reward_max < 1.0
    (True, True)
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(group_seed), 7001]))
    u = rng.uniform
    # the headroom sits half-way between two powers of two, so a probe one doubling above the
    # settled scale overflows and the settled scale does not (the real DeepSpeed-Chat pattern)
    headroom = float(rng.integers(11, 15)) + 0.5
    return Dynamics(
        lr_peak=float(10 ** u(-6.3, -5.7)),
        warmup_steps=max(5, int(n_steps * u(0.03, 0.08))),
        cosine=bool(rng.random() < 0.6),
        reward0=float(u(0.05, 0.25)),
        reward_max=float(u(0.6, 0.85)),
        tau_reward=float(n_steps * u(0.18, 0.35)),
        entropy0=float(u(0.8, 1.4)),
        entropy_floor=float(u(0.35, 0.6)),
        tau_entropy=float(n_steps * u(0.25, 0.5)),
        length0=float(u(250, 600)),
        length_growth=float(u(1.2, 2.0)),
        tau_length=float(n_steps * u(0.3, 0.6)),
        kl_max=float(u(0.01, 0.05)),
        tau_kl=float(n_steps * u(0.3, 0.6)),
        clip0=float(u(0.001, 0.004)),
        grad0=float(u(0.1, 0.4)),
        grad_sigma=float(u(0.12, 0.2)),
        noise=1.0,
        headroom_log2=headroom,
        init_scale_log2=int(rng.choice([16, 16, 16, 32])),
        scale_window_steps=int(rng.choice([80, 100, 100, 150])),
        batch_size=int(rng.choice([128, 256, 512])),
        step_time_s=float(u(20.0, 60.0)),
        n_gpus=int(rng.choice([64, 128, 256])),
    )
