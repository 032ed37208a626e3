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

    def active(self, step: int) -> bool:
        return self.name != "none" and step >= self.start_step

    def sync_mode(self, step: int) -> str:
        if not self.active(step):
            return "exact"
        return {
            "fp8_sampler": "fp8",
            "stale_sync": "stale",
            "partial_sync": "partial",
            "bf16_increment": "bf16_increment",
        }.get(self.name, "exact")

    def sampler_bf16(self, step: int) -> bool:
        return self.active(step) and self.name == "bf16_sampler"
