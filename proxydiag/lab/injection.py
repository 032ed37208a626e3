"""Fault injection specs: what is changed in the training stack, from which step."""

from __future__ import annotations

from dataclasses import dataclass

#: fault name -> (ground-truth label, variant description)
FAULTS: dict[str, tuple[str, str]] = {
    "none": ("healthy", ""),
    "fp16_static_scale": (
        "gradient_overflow",
        "fp16 gradients with the dynamic loss scaler replaced by a static 2^24 scale",
    ),
    "lr_blowup": ("loss_divergence", "learning rate raised 40x and gradient clipping disabled"),
    "policy_collapse": (
        "loss_divergence",
        "an entropy bonus far too strong: the policy is pushed towards uniform without a "
        "loss spike (entropy climbs, reward falls, clip fraction, KL and grad norm rise)",
    ),
    "bf16_sampler": ("precision_fault", "sampler computes in bf16 against the fp32 learner"),
    "fp8_sampler": ("precision_fault", "sampler weights fake-quantised to fp8 e4m3"),
    "stale_sync": ("precision_fault", "weight sync to the sampler silently stops"),
    "partial_sync": ("precision_fault", "weight sync skips the expert weights"),
    "bf16_increment": (
        "precision_fault",
        "master weights exported to a bf16 sampler copy as round-to-nearest increments",
    ),
    "stale_router": (
        "precision_fault",
        "weight sync to the sampler skips the routers: the rollout routes tokens on router "
        "weights frozen at the fault step while the learner's routers move",
    ),
    "replay_off": (
        "precision_fault",
        "a bf16 rollout engine whose routing the fp32 learner replays (R3); replay silently "
        "off from the fault step (the learner routes on its own routers)",
    ),
    "lost_master_weights": (
        "precision_fault",
        "the job dies a few steps after the fault-step checkpoint and resumes from it with "
        "bf16 weights only: from then on parameters are kept in bf16 (small updates round "
        "away) and gradients and their norm are bf16",
    ),
}

#: precision fault -> the kind of precision fault it is (``proxydiag.diagnose.precision_kind``,
#: docs/failures.md). Before its fault a lab run is exactly on-policy: the sampler and the
#: learner agree bit for bit and every mismatch metric logs 0, so a sampler whose precision
#: switches, a sync that stops, skips tensors or rounds the export make a true on-policy setup
#: non-zero (``on_policy_nonzero``); the routing and master-weight faults name their own kind
PRECISION_KIND: dict[str, str] = {
    "bf16_sampler": "on_policy_nonzero",
    "fp8_sampler": "on_policy_nonzero",
    "stale_sync": "on_policy_nonzero",
    "partial_sync": "on_policy_nonzero",
    "bf16_increment": "on_policy_nonzero",
    "stale_router": "routing_mismatch",
    "replay_off": "routing_replay_off",
    "lost_master_weights": "lost_master_weights",
}


@dataclass(frozen=True)
class FaultSpec:
    name: str = "none"
    start_step: int = 0

    def __post_init__(self) -> None:
        if self.name not in FAULTS:
            raise ValueError(f"unknown fault {self.name!r}; use one of {sorted(FAULTS)}")

    @property
    def label(self) -> str:
        return FAULTS[self.name][0]

    @property
    def variant(self) -> str:
        return FAULTS[self.name][1]

    @property
    def precision_kind(self) -> str | None:
        return PRECISION_KIND.get(self.name)

    def active(self, step: int) -> bool:
        return self.name != "none" and step >= self.start_step

    def sync_mode(self, step: int) -> str:
        if not self.active(step):
            return "exact"
        return {
            "fp8_sampler": "fp8",
            "stale_sync": "stale",
            "partial_sync": "partial",
            "stale_router": "stale_router",
            "bf16_increment": "bf16_increment",
        }.get(self.name, "exact")

    def sampler_bf16(self, step: int) -> bool:
        return self.active(step) and self.name == "bf16_sampler"

    def replay_off(self, step: int) -> bool:
        """Whether routing replay is off at ``step`` (in a run that replays)."""
        return self.active(step) and self.name == "replay_off"

    def lost_master_weights(self) -> bool:
        return self.name == "lost_master_weights"
