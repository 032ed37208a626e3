"""Parameters of :func:`proxydiag.fidelity.api.compare`: defaults, validation, TOML overrides.

A config file holds a ``[compare]`` table; keys left out keep their defaults (other tables, e.g.
the diagnose detectors', are ignored here)::

    [compare]
    resolution_points = 1000
    n_boot = 400
    floor_volatility = 0.4

>>> cfg = FidelityConfig()
>>> cfg.resolution_points, cfg.onset_tolerance_progress
(2000, 0.1)
>>> cfg.replace(n_boot=50).n_boot
50
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError
from proxydiag.metrics import LOG_SCALE_METRICS
from proxydiag.settings import check_ranges, override, ranged, read_toml

#: the table of a ``--config`` file read here; the others (``[scaler]``, ``[spikes]`` ... of
#: ``proxydiag diagnose``) are ignored, so one file can serve both commands
SECTION = "compare"
#: metrics whose dynamics decide the verdict (weight 2 in the overall score)
KEY_METRICS: tuple[str, ...] = (
    "reward",
    "entropy",
    "kl",
    "grad_norm",
    "loss",
    "pg_loss",
    "response_length",
    "clip_frac",
    # MoE routing: a pruned proxy's load-balancing and z losses must move like the full run's
    # (router entropy and the max expert load depend on the number of experts kept: scored,
    # weight 1, like any shared metric)
    "router_aux_loss",
    "router_z_loss",
    # routing consistency (the share of tokens whose top-k set changed between the rollout's
    # and the learner's router): a proxy must keep it like the loss curves
    "mismatch_route_change",
    "mismatch_route_order_change",
)
#: metrics that differ by design between a proxy and its full run: reported, weight 0
UNSCORED_METRICS: tuple[str, ...] = (
    "throughput",
    "step_time",
    "tokens",
    "samples",
    "lr",
    "skipped",
    "nonfinite",
)


@dataclass(frozen=True)
class FidelityConfig:
    """Every parameter of the fidelity analysis (units in the names)."""

    #: analysis resolution: at most this many points per metric and run for the shape tests
    #: (two per bucket, the bucket's min and max, so spikes survive); the other tests use one
    #: logged point per bucket, i.e. at most ``resolution_points // 2`` points
    resolution_points: int = ranged(2000, lo=32, hi=10**6)
    #: a metric needs this many finite aligned points in every run to be scored
    min_points: int = ranged(8, lo=4, hi=10**6)
    #: smoothing window of the trend and shape tests, as a fraction of the aligned points
    smooth_fraction: float = ranged(0.05, lo=0.0, hi=0.5)
    #: smoothing window of the trend that pseudo-seeds are built around (one full seed)
    trend_fraction: float = ranged(0.15, lo=0.01, hi=0.5)
    #: pseudo-seeds made by block bootstrap of the full run's residuals when there is one seed
    n_pseudo_seeds: int = ranged(8, lo=2, hi=1000)
    #: bootstrap replicates for the confidence intervals
    n_boot: int = ranged(200, lo=10, hi=100_000)
    #: two-sided confidence level of every interval
    ci_level: float = ranged(0.9, lo=0.5, hi=0.999)
    #: DTW band (Sakoe-Chiba window) as a fraction of the curve length
    dtw_band_fraction: float = ranged(0.1, lo=0.0, hi=1.0)
    #: DTW runs on the min/max envelope re-bucketed to at most this many points (DTW costs
    #: length × band; 500 points with a 10% band take ~0.3 ms in dtaidistance's C code)
    dtw_points: int = ranged(500, lo=8, hi=10**5)
    #: changes of these metrics (when positive) are taken on log scale, as are those of any
    #: positive metric whose full run spans at least a decade
    log_scale_metrics: tuple[str, ...] = LOG_SCALE_METRICS
    # Noise floors: a discrepancy below its floor is never held against a proxy, whatever the
    # seed baseline says (one seed pair cannot estimate the spread of seed-to-seed noise).
    #: trend: 1 - Spearman rho
    floor_trend: float = ranged(0.1, lo=1e-6, hi=10.0)
    #: shape: mean |difference| of the normalised curves (IQR units) and DTW distance per point
    floor_shape: float = ranged(0.25, lo=1e-6, hi=10.0)
    #: volatility: |log ratio| of the robust spreads of the increments (log 1.5 ≈ 0.405)
    floor_volatility: float = ranged(0.405, lo=1e-6, hi=10.0)
    #: increments: Kolmogorov-Smirnov statistic of the standardised increments
    floor_increments: float = ranged(0.12, lo=1e-6, hi=10.0)
    #: events: 1 - F1 of co-occurring events
    floor_events: float = ranged(0.5, lo=1e-6, hi=10.0)
    #: a metric scoring at least this is faithful (its discrepancies average ≲ 1.7× the largest
    #: seed-to-seed discrepancy)
    faithful_score: float = ranged(0.6, lo=0.0, hi=1.0)
    #: a metric scoring below this has diverged (discrepancies ≳ 3× the seed range)
    diverged_score: float = ranged(0.3, lo=0.0, hi="faithful_score")
    #: overall dynamics below this make a proxy partial
    partial_below: float = ranged(0.8, lo=0.0, hi=1.0)
    #: ... as do this many key metrics that are not faithful (one alone may be chance: each of
    #: ~8 key metrics is judged at the edge of the seed range), or one that diverged
    partial_min_metrics: int = ranged(2, lo=1, hi=1000)
    #: a fault is reproduced when its onsets differ by at most this fraction of run progress
    onset_tolerance_progress: float = ranged(0.1, lo=0.0, hi=1.0)
    #: events co-occur within this fraction of run progress
    event_window_progress: float = ranged(0.02, lo=0.0, hi=1.0)
    #: the order of symptoms is judged when the runs share at least this many
    order_min_symptoms: int = ranged(3, lo=2, hi=1000)
    #: a change smaller than this many robust σ of the run's noise is "no change"
    learn_min_sigma: float = ranged(3.0, lo=0.0, hi=100.0)
    #: a proxy that moves less than this fraction of the full run's change does not learn
    learn_min_fraction: float = ranged(0.15, lo=0.0, hi=1.0)
    #: ... but one that gains this fraction of it learns, by half of ``learn_min_sigma`` of its
    #: own noise (a noisier proxy: 96% of a modest full run's change was 2.7σ of its noise)
    learn_noisy_fraction: float = ranged(0.5, lo=0.0, hi=1.0)
    # Phases (docs/fidelity.md). A fault's excursion dominates every whole-run statistic, so
    # when the full seeds agree on a fault the run is split at its onset and each phase is
    # judged against the seeds' noise on that phase.
    #: the pre-fault phase ends this fraction of progress before the earliest onset (full seeds'
    #: and proxy's): a diagnosed onset can lag the root cause by a few percent (gradual climbs
    #: are dated where they steepen, 1-6% late in the blind audit of the tenth pass)
    phase_margin_progress: float = ranged(0.03, lo=0.0, hi=0.5)
    #: a phase shorter than this fraction of progress, or with fewer than ``min_points``
    #: buckets, is undecidable (its few points cannot tell a proxy from a seed)
    phase_min_progress: float = ranged(0.1, lo=0.0, hi=1.0)
    #: ... and a metric with fewer finite points than this in every run of a phase is left out
    #: of that phase (a phase without any is undecidable): on 8 points (28% of a 300-step run
    #: logged every 10 steps) two seeds differed beyond every test's seed range
    phase_min_points: int = ranged(20, lo=4, hi=10**6)
    #: with phases, also test the whole range as one (a third analysis: compare takes ~1.5x
    #: as long): ``metrics`` then holds whole-range statistics, which the fault's excursion
    #: dominates. Off, ``metrics`` is assembled from the phases' tests (fidelity/_assemble.py)
    whole_run_tests: bool = False
    # Learning progress over the pre-fault phase (or the whole healthy run), scored.
    #: a proxy must reach this fraction of the full seeds' change (reward gain, loss descent,
    #: entropy decline) with an interval reaching it: pruning lowers capacity, so less is
    #: accepted, but not less than half (issue 24's rule; the generator's 12.5% proxies reach
    #: 75-80% of the gain)
    learn_gain_fraction: float = ranged(0.5, lo=0.0, hi=1.0)
    #: ... and its progress at half of its change must lie within the seeds' range stretched by
    #: this factor either way (pruned proxies learn up to 1.25x slower in the generator; a
    #: 2.5x slower or 5x faster proxy is another dynamics)
    learn_pace_factor: float = ranged(2.0, lo=1.0, hi=100.0)
    #: a proxy whose change exceeds this multiple of the full seeds' (its interval above it)
    #: has other dynamics: pruning lowers capacity, it does not double the learning (a 5x
    #: faster entropy collapse moved the loss 2.6x the full seeds' before the fault)
    learn_excess_factor: float = ranged(2.0, lo=1.0, hi=100.0)
    # No averaging away: one test far outside the seed range decides its metric.
    #: a key metric's test whose discrepancy exceeds this many times the seed reference (score
    #: < 1/factor), with a bootstrap interval that excludes the seed range, makes the metric
    #: diverged; one diverged key metric in the pre-fault phase caps the verdict at partial.
    #: 2.0: a volatility ratio beyond x2.25 when seeds agree within x1.5 (the noise floor);
    #: the generator's 12.5% proxies reach x1.9
    diverged_factor: float = ranged(2.0, lo=1.0, hi=100.0)
    #: the tests that rule applies to: the spread and the distribution of step-to-step changes
    #: (the rank correlation of a metric that is flat noise, e.g. pg_loss, is itself noise)
    diverged_tests: tuple[str, ...] = ("volatility", "increments")
    #: ... on at least this many aligned points: the robust spread of n changes has a relative
    #: standard error of about 1.2/sqrt(n) (MAD efficiency 37%), 0.22 at 30 points, so a x2.25
    #: ratio is then ~3.7 standard errors; below it one seed pair of a 13-point pre-fault phase
    #: (a run logged every 10 steps) differed by x2.4 in the generator's corpora
    diverged_min_points: int = ranged(30, lo=2, hi=10**6)
    #: a positive key metric whose level (ratio of last-quarter medians, pre-fault phase) lies
    #: this factor beyond the seeds' own ratios has diverged (grad norms 3-6x the full seeds'
    #: while the seeds agree within x1.1 in the issue; pruned proxies reach 1.9x)
    level_diverged_ratio: float = ranged(3.0, lo=1.0, hi=1000.0)
    #: fidelity of an unfaithful proxy is its dynamics score times this
    unfaithful_factor: float = ranged(0.3, lo=0.0, hi=1.0)
    #: weights of the tests in a metric's score (level is reported, never scored)
    test_weights: dict[str, float] = field(
        default_factory=lambda: {
            "trend": 0.35,
            "shape": 0.25,
            "volatility": 0.25,
            "increments": 0.15,
        }
    )
    key_metrics: tuple[str, ...] = KEY_METRICS
    unscored_metrics: tuple[str, ...] = UNSCORED_METRICS

    def __post_init__(self) -> None:
        check_ranges(self, section="compare")

    @property
    def buckets(self) -> int:
        """Buckets of the analysis grid (each keeps min and max: 2 points per bucket)."""
        return self.resolution_points // 2

    def replace(self, **values: Any) -> FidelityConfig:
        """A copy with some parameters changed (validated)."""
        return override(self, values, section=SECTION, origin="<replace>")


def load_config(path: str | Path) -> FidelityConfig:
    """Read the ``[compare]`` table of a TOML file on top of the defaults.

    Raises :class:`~proxydiag.errors.ConfigError` naming the file and key for an unknown key, a
    value of the wrong type or out of range.
    """
    table = read_toml(path).get(SECTION, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: [{SECTION}] must be a table of parameters")
    return override(FidelityConfig(), table, section=SECTION, origin=str(path))
