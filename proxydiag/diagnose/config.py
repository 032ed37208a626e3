"""Detector and taxonomy parameters: defaults with their sources, validated, overridable from TOML.

A config file has one table per detector; any key left out keeps its default::

    [scaler]
    max_skip_fraction = 0.6

    [mismatch]
    prob_diff_bound = 0.02

>>> cfg = DiagnoseConfig()
>>> cfg.mismatch.prob_diff_bound
0.01
>>> cfg.replace(spikes={"z_threshold": 8.0}).spikes.z_threshold
8.0
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError


def _check(section: str, name: str, value: float, lo: float, hi: float) -> None:
    if not lo <= value <= hi:
        raise ConfigError(f"[{section}] {name} = {value!r} is out of range; use a value in [{lo}, {hi}]")


@dataclass(frozen=True)
class NonfiniteConfig:
    """NaN/Inf in gradients and losses, and the NaN-iteration counters."""

    #: metrics whose non-finite values count (veRL logs a skipped step's grad norm as NaN/Inf)
    metrics: tuple[str, ...] = ("grad_norm", "loss", "pg_loss")
    #: fewer non-finite points than this (and not at the end of the run) is an isolated glitch
    min_count: int = 2

    def __post_init__(self) -> None:
        _check("nonfinite", "min_count", self.min_count, 1, 10**6)


@dataclass(frozen=True)
class ScalerConfig:
    """fp16 dynamic loss scaling (DeepSpeed ``DynamicLossScaler``, Megatron, fairseq)."""

    #: window over which the skipped fraction is measured
    window_steps: int = 40
    #: persistent skipping: more than this fraction of a window's steps skipped. A healthy
    #: DeepSpeed-Chat SFT run skips 1.9% overall and ≤ 20% of any 40-step window (realruns/)
    max_skip_fraction: float = 0.5
    #: the leading burst of overflows while the scaler calibrates (65536 -> ~1024 in the
    #: DeepSpeed-Chat logs) may last this long
    calibration_steps: int = 150
    #: clean steps that end the calibration burst
    calibration_gap_steps: int = 10
    #: scale at or below this is the terminal state (DeepSpeed/Megatron ``min_loss_scale`` = 1)
    min_scale: float = 1.0
    #: the scale has collapsed when it ends this many halvings below its own running level
    #: and never recovers (the healthy DeepSpeed-Chat RM log recovers from 9 halvings)
    collapse_halvings: float = 8.0

    def __post_init__(self) -> None:
        _check("scaler", "window_steps", self.window_steps, 2, 10**6)
        _check("scaler", "max_skip_fraction", self.max_skip_fraction, 0.01, 1.0)
        _check("scaler", "calibration_steps", self.calibration_steps, 0, 10**7)
        _check("scaler", "calibration_gap_steps", self.calibration_gap_steps, 1, 10**6)
        _check("scaler", "min_scale", self.min_scale, 0.0, 1e9)
        _check("scaler", "collapse_halvings", self.collapse_halvings, 1.0, 64.0)


@dataclass(frozen=True)
class SpikeConfig:
    """Robust spikes on log scale (rolling median/MAD, as OLMo-style rolling-σ rules)."""

    metrics: tuple[str, ...] = ("grad_norm", "loss")
    #: trailing window of the rolling median/MAD
    window_steps: int = 50
    #: robust z (MAD units) of a spike
    z_threshold: float = 6.0
    #: and at least this ratio to the rolling median (EMA rules flag > 2× EMA)
    min_ratio: float = 2.0
    #: a spike that returns to its baseline within this many steps reverted (BLOOM 176B
    #: recovered in ~30 iterations)
    revert_steps: int = 50

    def __post_init__(self) -> None:
        _check("spikes", "window_steps", self.window_steps, 3, 10**6)
        _check("spikes", "z_threshold", self.z_threshold, 1.0, 100.0)
        _check("spikes", "min_ratio", self.min_ratio, 1.0, 1e6)
        _check("spikes", "revert_steps", self.revert_steps, 1, 10**6)


@dataclass(frozen=True)
class DivergenceConfig:
    """Sustained growth / level shift that does not revert, and the RL symptoms of divergence."""

    #: the tail (fraction of the run after the change) compared with the baseline before it
    tail_fraction: float = 0.1
    #: grad norm / loss must end this many times above its level before the change
    min_fold: float = 3.0
    #: ... and this many robust σ (of the level before it, autocorrelated wander included)
    z_min: float = 4.0
    #: RL symptoms: entropy collapse (÷ fold) or explosion (× fold), KL / clip-fraction blow-up
    symptom_fold: float = 3.0
    #: reward collapse: the tail falls this many robust σ below the level before the change
    reward_z_min: float = 6.0

    def __post_init__(self) -> None:
        _check("divergence", "tail_fraction", self.tail_fraction, 0.01, 0.5)
        _check("divergence", "min_fold", self.min_fold, 1.01, 1e6)
        _check("divergence", "z_min", self.z_min, 0.5, 1e3)
        _check("divergence", "symptom_fold", self.symptom_fold, 1.01, 1e6)
        _check("divergence", "reward_z_min", self.reward_z_min, 0.5, 1e3)


@dataclass(frozen=True)
class MismatchConfig:
    """Rollout-vs-learner mismatch (REFERENCE-failures.md, 'Precision fault')."""

    #: veRL Ascend guide: keep training/rollout_probs_diff_mean within 0.01
    prob_diff_bound: float = 0.01
    #: veRL rollout_corr warning: |kl| > 0.1
    kl_bound: float = 0.1
    #: veRL rollout_corr warning: chi2_token > 1
    chi2_bound: float = 1.0
    #: veRL rollout_corr warning: mean IS weight outside [0.5, 2]
    is_mean_low: float = 0.5
    is_mean_high: float = 2.0
    #: veRL rollout_corr warning: effective sample size < 0.3
    ess_bound: float = 0.3
    #: healthy Pearson ≈ 0.999; broken plumbing showed 0.05–0.62 (veRL issue reports)
    corr_bound: float = 0.99
    #: the early baseline: this fraction of the run (at least 10 points)
    baseline_fraction: float = 0.15
    #: relative change: the tail at least this many times the baseline's deviation ...
    min_fold: float = 2.5
    #: ... and this many robust σ above it
    z_min: float = 6.0
    #: a relative change decides the label when the level also crosses its published bound,
    #: or (metrics without a bound, or well below it) when it is at least this large;
    #: a level beyond its bound without a change against the baseline is only a warning
    strong_fold: float = 4.0

    def __post_init__(self) -> None:
        _check("mismatch", "prob_diff_bound", self.prob_diff_bound, 0.0, 1.0)
        _check("mismatch", "kl_bound", self.kl_bound, 0.0, 1e3)
        _check("mismatch", "chi2_bound", self.chi2_bound, 0.0, 1e6)
        _check("mismatch", "is_mean_low", self.is_mean_low, 0.0, 1.0)
        _check("mismatch", "is_mean_high", self.is_mean_high, 1.0, 1e6)
        _check("mismatch", "ess_bound", self.ess_bound, 0.0, 1.0)
        _check("mismatch", "corr_bound", self.corr_bound, -1.0, 1.0)
        _check("mismatch", "baseline_fraction", self.baseline_fraction, 0.02, 0.5)
        _check("mismatch", "min_fold", self.min_fold, 1.01, 1e6)
        _check("mismatch", "z_min", self.z_min, 0.5, 1e3)
        _check("mismatch", "strong_fold", self.strong_fold, 1.01, 1e6)


@dataclass(frozen=True)
class DriftConfig:
    """Slow drift (Mann-Kendall / Theil-Sen), stalls, throughput drops: context, not labels."""

    #: Mann-Kendall p-value below which a monotone trend is reported
    p_value: float = 1e-3
    #: a trend must move the level by this fraction of the series' spread over the run
    min_rel_change: float = 0.5
    #: at most this many points enter the trend tests (Theil-Sen is O(n²))
    max_points: int = 500
    #: throughput drop: the level after a change is below this fraction of the level before
    throughput_drop_ratio: float = 0.8

    def __post_init__(self) -> None:
        _check("drift", "p_value", self.p_value, 1e-12, 0.5)
        _check("drift", "min_rel_change", self.min_rel_change, 0.0, 100.0)
        _check("drift", "max_points", self.max_points, 20, 10**5)
        _check("drift", "throughput_drop_ratio", self.throughput_drop_ratio, 0.01, 0.99)


@dataclass(frozen=True)
class TaxonomyConfig:
    """How events become a label."""

    #: a mismatch change counts as the cause of a divergence that starts no earlier than this
    #: many steps before it (onsets of gradual changes are uncertain by a few log intervals)
    order_tolerance_steps: int = 5

    def __post_init__(self) -> None:
        _check("taxonomy", "order_tolerance_steps", self.order_tolerance_steps, 0, 10**6)


@dataclass(frozen=True)
class DiagnoseConfig:
    """All parameters of :func:`proxydiag.diagnose.api.diagnose`."""

    nonfinite: NonfiniteConfig = field(default_factory=NonfiniteConfig)
    scaler: ScalerConfig = field(default_factory=ScalerConfig)
    spikes: SpikeConfig = field(default_factory=SpikeConfig)
    divergence: DivergenceConfig = field(default_factory=DivergenceConfig)
    mismatch: MismatchConfig = field(default_factory=MismatchConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    taxonomy: TaxonomyConfig = field(default_factory=TaxonomyConfig)

    def replace(self, **sections: Mapping[str, Any]) -> DiagnoseConfig:
        """A copy with some parameters changed: ``cfg.replace(scaler={"window_steps": 80})``."""
        return _from_mapping(sections, base=self, origin="<replace>")


def load_config(path: str | Path) -> DiagnoseConfig:
    """Read a TOML file of overrides on top of the defaults.

    Raises :class:`~proxydiag.errors.ConfigError` naming the file and the key for an unknown
    section or key, a value of the wrong type, or a value out of range.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc}); fix the file") from exc
    return _from_mapping(data, base=DiagnoseConfig(), origin=str(path))


def _from_mapping(data: Mapping[str, Any], *, base: DiagnoseConfig, origin: str) -> DiagnoseConfig:
    sections: dict[str, Any] = {}
    known = {f.name for f in fields(DiagnoseConfig)}
    for name, table in data.items():
        if name not in known:
            raise ConfigError(f"{origin}: unknown section [{name}]; known: {', '.join(sorted(known))}")
        if not isinstance(table, Mapping):
            raise ConfigError(f"{origin}: [{name}] must be a table of parameters")
        sections[name] = _section(getattr(base, name), name, table, origin)
    try:
        return dataclasses.replace(base, **sections)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from exc


def _section(current: Any, name: str, table: Mapping[str, Any], origin: str) -> Any:
    types = {f.name: f.type for f in fields(current)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in types:
            raise ConfigError(
                f"{origin}: unknown key {name}.{key}; known: {', '.join(sorted(types))}"
            )
        default = getattr(current, key)
        values[key] = _coerce(value, default, f"{origin}: {name}.{key}")
    try:
        return dataclasses.replace(current, **values)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from exc


def _coerce(value: Any, default: Any, where: str) -> Any:
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings")
        return tuple(value)
    if isinstance(default, bool) or isinstance(value, bool):
        raise ConfigError(f"{where} must be a number, not {value!r}")
    if isinstance(default, int) and isinstance(value, int):
        return value
    if isinstance(default, float) and isinstance(value, int | float):
        return float(value)
    raise ConfigError(f"{where} must be {type(default).__name__}, not {value!r}")
