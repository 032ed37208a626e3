"""The watcher's small rules: its limits, when an overflow burst is held, the router's lead,
and what counts as a logged number."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxydiag.diagnose.config import ScalerConfig
from proxydiag.diagnose.detectors.nonfinite import FP16
from proxydiag.diagnose.taxonomy import Verdict
from proxydiag.errors import ConfigError

#: a suspicious move re-fits again once it is this many times the size it had at the last one
GROWTH = 1.25


@dataclass(frozen=True)
class WatchLimits:
    """How much the watcher holds per metric and how often it re-fits (all bounded)."""

    #: first points kept at full resolution (the scaler's calibration, the warm-up)
    head_points: int = 64
    #: thinned points kept of the middle of the run (its baseline)
    history_points: int = 192
    #: last points kept at full resolution (where onsets are located)
    recent_points: int = 384
    #: suspicious looks (levels) or steps (points) in a row that each re-fit; later ones
    #: re-fit on streaks 2^k only
    eager_checks: int = 8
    #: re-fit at least every this many new logged steps, whatever the triggers say
    periodic_steps: int = 128
    #: the levels of the metrics are looked at every this many steps of the run
    level_every_steps: int = 10

    def __post_init__(self) -> None:
        for name in (
            "head_points",
            "history_points",
            "recent_points",
            "eager_checks",
            "periodic_steps",
            "level_every_steps",
        ):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"watch limits: {name} must be at least 1")


def calibration_hold(
    *,
    onset_step: int,
    first_step: int,
    last_step: int,
    interval: float,
    scaler: ScalerConfig,
    precision: str | None,
    logs_scale: bool,
) -> bool:
    """True while a burst of overflows that starts with the run may be the fp16 loss scaler
    calibrating (DeepSpeed: 2^16 down to ~2^10): it is judged once the calibration window
    (``[scaler] calibration_steps``, or ``unknown_calibration_steps`` when the precision is
    unknown) and the clean gap that ends it (``calibration_gap_steps``) have passed. A burst
    that starts later, or a bf16/fp32 run, is never held.

    >>> from proxydiag.diagnose.config import ScalerConfig
    >>> args = dict(first_step=0, interval=1.0, scaler=ScalerConfig(), logs_scale=True)
    >>> calibration_hold(onset_step=1, last_step=100, precision=None, **args)
    True
    >>> calibration_hold(onset_step=1, last_step=200, precision=None, **args)
    False
    >>> calibration_hold(onset_step=120, last_step=130, precision="fp16", **args)
    False
    """
    fp16 = logs_scale or (precision or "").startswith(FP16)
    if not fp16 and precision is not None:
        return False  # bf16 / fp32: no calibration
    gap = scaler.calibration_gap_steps * max(interval, 1.0)
    if onset_step > first_step + gap:
        return False
    window = scaler.calibration_steps if fp16 else scaler.unknown_calibration_steps
    return last_step < first_step + window + gap


def router_lead(v: Verdict) -> int | None:
    """Steps by which the first MoE routing event (:mod:`proxydiag.diagnose.detectors.router`) came
    before the verdict's onset; None without one that came first."""
    starts = [
        e.onset_step for e in v.chain if e.kind.startswith("router_") and e.onset_step is not None
    ]
    if v.onset_step is None or not starts or min(starts) >= v.onset_step:
        return None
    return v.onset_step - min(starts)


def number(value: Any) -> float | None:
    """A logged value as a float: numbers, bools, numpy and torch scalars; None otherwise.

    >>> number(3), number("text"), number(float("nan")) != number(float("nan"))
    (3.0, None, True)
    """
    if isinstance(value, bool | int | float):
        return float(value)
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            found = item()
        except (ValueError, RuntimeError):  # not a single element
            return None
        return float(found) if isinstance(found, bool | int | float) else None
    return None
