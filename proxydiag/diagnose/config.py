"""Detector and taxonomy parameters: defaults with their sources, validated, overridable from TOML.

A config file has one table per detector; any key left out keeps its default (a ``[compare]``
table, for ``proxydiag compare``, may share the file)::

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
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError
from proxydiag.settings import check_ranges, override, ranged, read_toml


@dataclass(frozen=True)
class NonfiniteConfig:
    """NaN/Inf in gradients and losses, and the NaN-iteration counters."""

    #: metrics whose non-finite values count (veRL logs a skipped step's grad norm as NaN/Inf;
    #: perplexity is exp(loss), and DeepSpeed examples print only it: ``Perplexity: nan``)
    metrics: tuple[str, ...] = ("grad_norm", "loss", "pg_loss", "perplexity")
    #: fewer non-finite points than this (and not at the end of the run) is an isolated glitch
    min_count: int = ranged(2, lo=1, hi=10**6)

    def __post_init__(self) -> None:
        check_ranges(self, section="nonfinite")


@dataclass(frozen=True)
class ScalerConfig:
    """fp16 dynamic loss scaling (DeepSpeed ``DynamicLossScaler``, Megatron, fairseq)."""

    #: window over which the skipped fraction is measured
    window_steps: int = ranged(40, lo=2, hi=10**6)
    #: persistent skipping: more than this fraction of a window's steps skipped. A healthy
    #: DeepSpeed-Chat SFT run skips 1.9% overall and ≤ 20% of any 40-step window (realruns/)
    max_skip_fraction: float = ranged(0.5, lo=0.01, hi=1.0)
    #: ... and in a run without a dynamic loss scaler (no changing loss scale, precision not
    #: fp16: bf16 and fp32 skip nothing by design), more than this fraction is persistent
    unscaled_skip_fraction: float = ranged(0.25, lo=0.01, hi=1.0)
    #: the leading burst of overflows while the scaler calibrates (65536 -> ~1024 in the
    #: DeepSpeed-Chat logs) may last this long
    calibration_steps: int = ranged(150, lo=0, hi=10**7)
    #: ... or this long in a run that logs neither a loss scale nor its precision (HF's fp16
    #: AMP: 2^16 down to 2^10 is six halvings, and a bf16 run has no calibration at all)
    unknown_calibration_steps: int = ranged(16, lo=0, hi=10**7)
    #: clean steps that end the calibration burst
    calibration_gap_steps: int = ranged(10, lo=1, hi=10**6)
    #: overflow steps in a row a dynamic scaler shows after its calibration in a healthy run
    #: (a growth probe overflows once, twice with DeepSpeed's and Megatron's hysteresis 2; a
    #: few halvings absorb a gradient that grew): a run or a live prefix that ends in a streak
    #: this long is not yet "ending non-finite" (a healthy fp16 GRPO run on TRL skipped steps
    #: 16 and 17 after its calibration burst)
    benign_streak_points: int = ranged(3, lo=0, hi=10**6)
    #: scale at or below this is the terminal state (DeepSpeed/Megatron ``min_loss_scale`` = 1)
    min_scale: float = ranged(1.0, lo=0.0, hi=1e9)
    #: the scale has collapsed when it ends this many halvings below its own running level
    #: and never recovers (the healthy DeepSpeed-Chat RM log recovers from 9 halvings)
    collapse_halvings: float = ranged(8.0, lo=1.0, hi=64.0)

    def __post_init__(self) -> None:
        check_ranges(self, section="scaler")


@dataclass(frozen=True)
class SpikeConfig:
    """Robust spikes on log scale (rolling median/MAD, as OLMo-style rolling-σ rules)."""

    metrics: tuple[str, ...] = ("grad_norm", "loss")
    #: trailing window of the rolling median/MAD
    window_steps: int = ranged(50, lo=3, hi=10**6)
    #: robust z (MAD units) of a spike
    z_threshold: float = ranged(6.0, lo=1.0, hi=100.0)
    #: and at least this ratio to the rolling median (EMA rules flag > 2× EMA)
    min_ratio: float = ranged(2.0, lo=1.0, hi=1e6)
    #: a spike that returns to its baseline within this many steps reverted (BLOOM 176B
    #: recovered in ~30 iterations)
    revert_steps: int = ranged(50, lo=1, hi=10**6)

    def __post_init__(self) -> None:
        check_ranges(self, section="spikes")


@dataclass(frozen=True)
class DivergenceConfig:
    """Sustained growth / level shift that does not revert, and the RL symptoms of divergence."""

    #: the tail (fraction of the run after the change) compared with the baseline before it
    tail_fraction: float = ranged(0.1, lo=0.01, hi=0.5)
    #: grad norm must end this many times above its level before the change
    min_fold: float = ranged(3.0, lo=1.01, hi=1e6)
    #: ... and the loss this many: a loss in nats rarely triples (BLOOM tr8-104B diverged from
    #: 6.44 to 11.4, 1.77x; docs/failures.md#loss-divergence)
    loss_fold: float = ranged(1.5, lo=1.01, hi=1e6)
    #: ... and this many robust σ (of the level before it, autocorrelated wander included)
    z_min: float = ranged(4.0, lo=0.5, hi=1e3)
    #: RL symptoms: entropy collapse (÷ fold) or explosion (× fold), KL / clip-fraction blow-up
    symptom_fold: float = ranged(3.0, lo=1.01, hi=1e6)
    #: a KL to the reference that grows but ends below this (nats) is what a healthy GRPO/PPO
    #: policy does as it leaves its reference (0.001 -> 0.01): context (info), not a warning
    kl_quiet_level: float = ranged(0.02, lo=0.0, hi=1e3)
    #: reward collapse: the tail falls this many robust σ below the level before the change
    reward_z_min: float = ranged(6.0, lo=0.5, hi=1e3)
    #: a smaller fall (this many σ) is a ``reward_decline`` (info): a divergence only together
    #: with an entropy collapse and a gradient gone unstable (small, noisy RL batches)
    reward_z_weak: float = ranged(2.0, lo=0.5, hi=1e3)

    def __post_init__(self) -> None:
        check_ranges(self, section="divergence")


@dataclass(frozen=True)
class CollapseConfig:
    """Policy collapse: RL symptoms out of range together (docs/failures.md#policy-collapse)."""

    #: look for it at all
    enabled: bool = True
    #: distinct metrics out together (reward, or entropy climbing without a reward, included)
    least_symptoms: int = ranged(3, lo=2, hi=6)
    #: the reward has lost at least this fraction of the level it left
    reward_fall: float = ranged(0.3, lo=0.01, hi=1.0)
    #: entropy has climbed or fallen this many fold (a collapse: 2x or more)
    entropy_fold: float = ranged(2.0, lo=1.01, hi=1e6)
    #: the grad norm has risen this many fold (a few-fold: less than a divergence's min_fold)
    grad_fold: float = ranged(2.0, lo=1.01, hi=1e6)

    def __post_init__(self) -> None:
        check_ranges(self, section="collapse")


@dataclass(frozen=True)
class MismatchConfig:
    """Rollout-vs-learner mismatch (docs/failures.md#signatures-and-published-bounds)."""

    #: veRL Ascend guide: keep training/rollout_probs_diff_mean within 0.01
    prob_diff_bound: float = ranged(0.01, lo=0.0, hi=1.0)
    #: veRL rollout_corr warning: |kl| > 0.1
    kl_bound: float = ranged(0.1, lo=0.0, hi=1e3)
    #: veRL rollout_corr warning: chi2_token > 1
    chi2_bound: float = ranged(1.0, lo=0.0, hi=1e6)
    #: veRL rollout_corr warning: mean IS weight outside [0.5, 2]
    is_mean_low: float = ranged(0.5, lo=0.0, hi=1.0)
    is_mean_high: float = ranged(2.0, lo=1.0, hi=1e6)
    #: veRL rollout_corr warning: effective sample size < 0.3
    ess_bound: float = ranged(0.3, lo=0.0, hi=1.0)
    #: healthy Pearson ≈ 0.999; broken plumbing showed 0.05–0.62 (veRL issue reports)
    corr_bound: float = ranged(0.99, lo=-1.0, hi=1.0)
    #: NeMo-RL's multiplicative token probability error: 1.0 perfect, above 1.05 "needs
    #: investigation" (NeMo-RL docs/adding-new-models.md); 1.03-1.05 is an fp8 rollout
    prob_error_bound: float = ranged(1.05, lo=1.0, hi=1e6)
    #: routing replay (R3): the share of router micro-batches replayed "should be near 1.0"
    #: (AReaL r3/README.md); below this it is off for a part of the batch
    route_replay_bound: float = ranged(0.95, lo=0.0, hi=1.0)
    #: the share of token routes that fell back to the learner's router "should normally be
    #: zero or near-zero" (NeMo-RL docs/guides/router-replay.md); above this it is not
    route_fallback_bound: float = ranged(0.01, lo=0.0, hi=1.0)
    #: two mismatch quantities disagree when one changes by this fold while another stays
    #: within ``agree_fold`` of its own baseline
    disagree_fold: float = ranged(5.0, lo=1.5, hi=1e6)
    agree_fold: float = ranged(1.5, lo=1.01, hi=1e6)
    #: the early baseline: this fraction of the run (at least 10 points)
    baseline_fraction: float = ranged(0.15, lo=0.02, hi=0.5)
    #: relative change: the tail at least this many times the baseline's deviation ...
    min_fold: float = ranged(2.5, lo=1.01, hi=1e6)
    #: ... and this many robust σ above it
    z_min: float = ranged(6.0, lo=0.5, hi=1e3)
    #: a relative change decides the label when the level also crosses its published bound,
    #: or (metrics without a bound, or well below it) when it is at least this large;
    #: a level beyond its bound without a change against the baseline is only a warning
    strong_fold: float = ranged(4.0, lo=1.01, hi=1e6)
    #: the streaming statistic (mismatch_shift): a fast change (three quarters of its rise
    #: within the last third of the run so far) decides from this fold of the early level's
    #: disagreement (squared for a second-order measure); slow changes are the change fit's
    shift_fold: float = ranged(2.3, lo=1.01, hi=1e6)

    def __post_init__(self) -> None:
        check_ranges(self, section="mismatch")


@dataclass(frozen=True)
class DriftConfig:
    """Slow drift (Mann-Kendall / Theil-Sen), stalls, throughput drops: context, not labels."""

    #: Mann-Kendall p-value below which a monotone trend is reported
    p_value: float = ranged(1e-3, lo=1e-12, hi=0.5)
    #: a trend must move the level by this fraction of the series' spread over the run
    min_rel_change: float = ranged(0.5, lo=0.0, hi=100.0)
    #: at most this many points enter the trend tests (Theil-Sen is O(n²))
    max_points: int = ranged(500, lo=20, hi=10**5)
    #: throughput drop: the level after a change is below this fraction of the level before
    throughput_drop_ratio: float = ranged(0.8, lo=0.01, hi=0.99)

    def __post_init__(self) -> None:
        check_ranges(self, section="drift")


@dataclass(frozen=True)
class TaxonomyConfig:
    """How events become a label."""

    #: a mismatch change counts as the cause of a divergence that starts no earlier than this
    #: many steps before it (onsets of gradual changes are uncertain by a few log intervals)
    order_tolerance_steps: int = ranged(5, lo=0, hi=10**6)

    def __post_init__(self) -> None:
        check_ranges(self, section="taxonomy")


@dataclass(frozen=True)
class DiagnoseConfig:
    """All parameters of :func:`proxydiag.diagnose.api.diagnose`."""

    nonfinite: NonfiniteConfig = field(default_factory=NonfiniteConfig)
    scaler: ScalerConfig = field(default_factory=ScalerConfig)
    spikes: SpikeConfig = field(default_factory=SpikeConfig)
    divergence: DivergenceConfig = field(default_factory=DivergenceConfig)
    collapse: CollapseConfig = field(default_factory=CollapseConfig)
    mismatch: MismatchConfig = field(default_factory=MismatchConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    taxonomy: TaxonomyConfig = field(default_factory=TaxonomyConfig)

    def replace(self, **sections: Mapping[str, Any]) -> DiagnoseConfig:
        """A copy with some parameters changed: ``cfg.replace(scaler={"window_steps": 80})``."""
        return _from_mapping(sections, base=self, origin="<replace>")


#: tables of a shared ``--config`` file that belong to another command (``proxydiag compare``)
FOREIGN_SECTIONS: tuple[str, ...] = ("compare",)


def load_config(path: str | Path) -> DiagnoseConfig:
    """Read a TOML file of overrides on top of the defaults.

    The ``[compare]`` table of a file shared with ``proxydiag compare`` is ignored. Raises
    :class:`~proxydiag.errors.ConfigError` naming the file and the key for an unknown section
    or key, a value of the wrong type, or a value out of range.
    """
    data = read_toml(path)
    mine = {k: v for k, v in data.items() if k not in FOREIGN_SECTIONS}
    return _from_mapping(mine, base=DiagnoseConfig(), origin=str(path))


def _from_mapping(data: Mapping[str, Any], *, base: DiagnoseConfig, origin: str) -> DiagnoseConfig:
    sections: dict[str, Any] = {}
    known = {f.name for f in fields(DiagnoseConfig)}
    for name, table in data.items():
        if name not in known:
            raise ConfigError(
                f"{origin}: unknown section [{name}]; known: {', '.join(sorted(known))}"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(f"{origin}: [{name}] must be a table of parameters")
        sections[name] = override(getattr(base, name), table, section=name, origin=origin)
    return dataclasses.replace(base, **sections)
