"""What to simulate: a :class:`Scenario` (run shape, precision, pruning, injected fault) and
the ground truth it implies (:class:`Truth`).

Fault variants and the failure class each belongs to:

==========================  =================  =============================================
variant                     class              what is injected at ``onset_step``
==========================  =================  =============================================
``fp16_scaler_collapse``    gradient_overflow  fp16 overflow on every step: the scale halves
                                               down to its minimum, steps are skipped
``bf16_nonfinite``          gradient_overflow  non-finite grad norms on most steps (skipped)
``divergence``              loss_divergence    grad-norm growth that does not revert, then
                                               reward/entropy collapse, KL and clip blow-up
``slow_drift``              loss_divergence    slow upward drift of grad norm, falling reward
``policy_collapse``         loss_divergence    an RL policy collapsing without a loss spike:
                                               reward falls, entropy explodes or collapses,
                                               KL and clip fraction climb, grad norm a few-fold
``sync_step``               precision_fault    rollout-vs-learner mismatch jumps (broken sync)
``gradual_climb``           precision_fault    mismatch climbs (rounding lag, fp8 sampler)
``climb_then_divergence``   precision_fault    a climb that later tips the run into
                                               divergence (the climb is the root cause)
``export_lag``              precision_fault    the mismatch rises for 60-150 steps and comes
                                               back (a bf16 export lagging, then caught up)
``sync_sawtooth``           precision_fault    the mismatch climbs between weight syncs
                                               every 20-40 steps and drops at each
``routing_replay_off``      precision_fault    routing replay goes off for 20-80% of the
                                               routes: the replayed share falls, the
                                               mismatch steps up 3-6x
``routing_mismatch``        precision_fault    the share of tokens whose top-k experts differ
                                               between rollout and learner routers climbs
                                               6-12x, the mismatch 1.5-2.5x; half of them
                                               later tip into divergence
``lost_master_weights``     precision_fault    the learner loses its fp32 master weights: the
                                               grad norm is a bf16 number from then on and
                                               learning slows (small updates vanish)
==========================  =================  =============================================

A corpus that asks for a routing variant logs the routing shares (replayed or fallen-back
share, top-k set change) in every run, healthy ones included (:attr:`Scenario.routing`).

Each precision variant also names the kind of precision fault its shape stands for
(:data:`PRECISION_KIND`, what ``diagnose`` reports as ``precision_kind``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from proxydiag.errors import ConfigError

VARIANT_CLASS: dict[str, str] = {
    "fp16_scaler_collapse": "gradient_overflow",
    "bf16_nonfinite": "gradient_overflow",
    "divergence": "loss_divergence",
    "slow_drift": "loss_divergence",
    "policy_collapse": "loss_divergence",
    "sync_step": "precision_fault",
    "gradual_climb": "precision_fault",
    "climb_then_divergence": "precision_fault",
    "export_lag": "precision_fault",
    "sync_sawtooth": "precision_fault",
    "routing_replay_off": "precision_fault",
    "routing_mismatch": "precision_fault",
    "lost_master_weights": "precision_fault",
    "from_start": "precision_fault",
    "on_policy_nonzero": "precision_fault",
    "resume_shift": "precision_fault",
}
#: variants that need the routing shares logged
ROUTING_VARIANTS = ("routing_replay_off", "routing_mismatch")
#: precision variant -> the kind of precision fault it is (docs/failures.md)
PRECISION_KIND: dict[str, str] = {
    "sync_step": "weight_sync",
    "gradual_climb": "drift",
    "climb_then_divergence": "drift",
    "export_lag": "export_lag",
    "sync_sawtooth": "sync_sawtooth",
    "routing_replay_off": "routing_replay_off",
    "routing_mismatch": "routing_mismatch",
    "lost_master_weights": "lost_master_weights",
    "from_start": "from_start",
    "on_policy_nonzero": "on_policy_nonzero",
    "resume_shift": "resume_shift",
}
#: variants whose fault is there from the first step (a proxy shows it there too, or not at
#: all: it cannot come early or late)
START_VARIANTS = ("from_start",)
#: variants whose run restarts from a checkpoint at the onset: the steps from the checkpoint
#: to the crash are logged twice (the superseded timeline, then the resumed one)
RESUME_VARIANTS = ("resume_shift",)
#: the variants a corpus was first written with ...
FIRST_VARIANTS = (
    "fp16_scaler_collapse",
    "bf16_nonfinite",
    "divergence",
    "slow_drift",
    "sync_step",
    "gradual_climb",
    "climb_then_divergence",
)
#: ... and those added since, in the order they came (each only on request: a corpus of a
#: given seed stays the corpus it was)
LATER_VARIANTS = (
    "policy_collapse",
    "export_lag",
    "sync_sawtooth",
    "routing_replay_off",
    "routing_mismatch",
    "lost_master_weights",
    "from_start",
    "on_policy_nonzero",
    "resume_shift",
)
#: variant -> the number its fault parameters are seeded with (the first seven sorted, later
#: variants after them: a variant added never changes the runs of another)
VARIANT_SEED: dict[str, int] = {
    v: i for i, v in enumerate((*sorted(FIRST_VARIANTS), *LATER_VARIANTS))
}
PRECISIONS = ("fp16", "bf16")
#: how a run's curves may differ from its group's shared dynamics
DYNAMICS = ("normal", "no_learning", "volatile", "noisy_grads", "fast_entropy")


@dataclass(frozen=True)
class FaultSpec:
    """One injected fault: its variant and the step where its root cause begins."""

    variant: str
    onset_step: int
    #: for divergences: NaN from ``onset_step + nan_after_steps`` on (None: stays finite)
    nan_after_steps: int | None = None

    def __post_init__(self) -> None:
        if self.variant not in VARIANT_CLASS:
            raise ConfigError(
                f"unknown fault variant {self.variant!r}; use one of {sorted(VARIANT_CLASS)}"
            )
        if self.onset_step < 1:
            raise ConfigError(f"fault onset_step must be >= 1, got {self.onset_step}")

    @property
    def label(self) -> str:
        return VARIANT_CLASS[self.variant]


@dataclass(frozen=True)
class Scenario:
    """A run to simulate. Runs with the same ``group_seed`` share their underlying dynamics."""

    name: str
    n_steps: int = 500
    precision: str = "bf16"
    group_seed: int = 0
    experts_total: int = 64
    experts_kept: int = 64
    fault: FaultSpec | None = None
    dynamics: str = "normal"
    role: str = "full"
    group: str = ""
    #: the run logs MoE routing shares (routing replay, top-k set change)
    routing: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.dynamics not in DYNAMICS:
            raise ConfigError(f"dynamics must be one of {DYNAMICS}, got {self.dynamics!r}")
        if not 1 <= self.experts_kept <= self.experts_total:
            raise ConfigError("experts_kept must be in [1, experts_total]")
        if self.n_steps < 50:
            raise ConfigError(f"n_steps must be >= 50, got {self.n_steps}")
        if self.fault is not None and self.fault.onset_step >= self.n_steps:
            raise ConfigError(f"fault onset {self.fault.onset_step} is past the run's end")
        if (
            self.fault is not None
            and self.fault.variant == "fp16_scaler_collapse"
            and (self.precision != "fp16")
        ):
            raise ConfigError("fp16_scaler_collapse needs precision='fp16'")
        if (
            self.fault is not None
            and self.fault.variant == "bf16_nonfinite"
            and (self.precision != "bf16")
        ):
            raise ConfigError("bf16_nonfinite needs precision='bf16'")
        if self.fault is not None and self.fault.variant in ROUTING_VARIANTS and not self.routing:
            raise ConfigError(f"{self.fault.variant} needs routing=True (routing shares logged)")

    @property
    def kept_fraction(self) -> float:
        return self.experts_kept / self.experts_total

    @property
    def truth(self) -> Truth:
        if self.fault is None:
            return Truth("healthy", None, "")
        return Truth(self.fault.label, self.fault.onset_step, self.fault.variant)


@dataclass(frozen=True)
class Truth:
    """Ground truth of one run: failure class, onset step (None when healthy), variant."""

    label: str
    onset_step: int | None
    variant: str


def named(name: str, *, n_steps: int = 500) -> Scenario:
    """A named scenario: ``healthy`` or a fault variant, with the fault at 40% of the run (at the
    first step for a fault there from the start).

    >>> named("sync_step").fault
    FaultSpec(variant='sync_step', onset_step=200, nan_after_steps=None)
    """
    if name == "healthy":
        return Scenario(name, n_steps=n_steps, precision="fp16")
    if name not in VARIANT_CLASS:
        raise ConfigError(f"unknown scenario {name!r}; use one of {', '.join(SCENARIOS)}")
    precision = "fp16" if name == "fp16_scaler_collapse" else "bf16"
    nan_after = n_steps // 5 if name == "divergence" else None
    fault = FaultSpec(name, 1 if name in START_VARIANTS else int(n_steps * 0.4), nan_after)
    routing = name in ROUTING_VARIANTS
    return replace(
        Scenario(name, n_steps=n_steps, precision=precision, routing=routing), fault=fault
    )


SCENARIOS: tuple[str, ...] = ("healthy", *VARIANT_CLASS)
