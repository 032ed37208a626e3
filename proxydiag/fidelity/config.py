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

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError

#: metrics whose dynamics decide the verdict (weight 2 in the overall score)
KEY_METRICS: tuple[str, ...] = (
    "reward", "entropy", "kl", "grad_norm", "loss", "pg_loss", "response_length", "clip_frac",
)
#: metrics that differ by design between a proxy and its full run: reported, weight 0
UNSCORED_METRICS: tuple[str, ...] = (
    "throughput", "step_time", "tokens", "samples", "lr", "skipped", "nonfinite",
)


@dataclass(frozen=True)
class FidelityConfig:
    """Every parameter of the fidelity analysis (units in the names)."""

    #: analysis resolution: at most this many points per metric and run for the shape tests
    #: (two per bucket, the bucket's min and max, so spikes survive); the other tests use one
    #: logged point per bucket, i.e. at most ``resolution_points // 2`` points
    resolution_points: int = 2000
    #: a metric needs this many finite aligned points in every run to be scored
    min_points: int = 8
    #: smoothing window of the trend and shape tests, as a fraction of the aligned points
    smooth_fraction: float = 0.05
    #: smoothing window of the trend that pseudo-seeds are built around (one full seed)
    trend_fraction: float = 0.15
    #: pseudo-seeds made by block bootstrap of the full run's residuals when there is one seed
    n_pseudo_seeds: int = 8
    #: bootstrap replicates for the confidence intervals
    n_boot: int = 200
    #: two-sided confidence level of every interval
    ci_level: float = 0.9
    #: DTW band (Sakoe-Chiba window) as a fraction of the curve length
    dtw_band_fraction: float = 0.1
    #: DTW runs on the min/max envelope re-bucketed to at most this many points (DTW costs
    #: length × band; 500 points with a 10% band take ~0.3 ms in dtaidistance's C code)
    dtw_points: int = 500
    #: changes of these metrics (when positive) are taken on log scale, as are those of any
    #: positive metric whose full run spans at least a decade
    log_scale_metrics: tuple[str, ...] = ("grad_norm", "loss_scale")
    # Noise floors: a discrepancy below its floor is never held against a proxy, whatever the
    # seed baseline says (one seed pair cannot estimate the spread of seed-to-seed noise).
    #: trend: 1 - Spearman rho
    floor_trend: float = 0.1
    #: shape: mean |difference| of the normalised curves (IQR units) and DTW distance per point
    floor_shape: float = 0.25
    #: volatility: |log ratio| of the robust spreads of the increments (log 1.5 ≈ 0.405)
    floor_volatility: float = 0.405
    #: increments: Kolmogorov-Smirnov statistic of the standardised increments
    floor_increments: float = 0.12
    #: events: 1 - F1 of co-occurring events
    floor_events: float = 0.5
    #: a metric scoring at least this is faithful (its discrepancies average ≲ 1.7× the largest
    #: seed-to-seed discrepancy)
    faithful_score: float = 0.6
    #: a metric scoring below this has diverged (discrepancies ≳ 3× the seed range)
    diverged_score: float = 0.3
    #: overall dynamics below this make a proxy partial
    partial_below: float = 0.8
    #: ... as do this many key metrics that are not faithful (one alone may be chance: each of
    #: ~8 key metrics is judged at the edge of the seed range), or one that diverged
    partial_min_metrics: int = 2
    #: a fault is reproduced when its onsets differ by at most this fraction of run progress
    onset_tolerance_progress: float = 0.1
    #: events co-occur within this fraction of run progress
    event_window_progress: float = 0.02
    #: the order of symptoms is judged when the runs share at least this many
    order_min_symptoms: int = 3
    #: a change smaller than this many robust σ of the run's noise is "no change"
    learn_min_sigma: float = 3.0
    #: a proxy that moves less than this fraction of the full run's change does not learn
    learn_min_fraction: float = 0.15
    #: fidelity of an unfaithful proxy is its dynamics score times this
    unfaithful_factor: float = 0.3
    #: weights of the tests in a metric's score (level is reported, never scored)
    test_weights: dict[str, float] = field(
        default_factory=lambda: {"trend": 0.35, "shape": 0.25, "volatility": 0.25,
                                 "increments": 0.15}
    )
    key_metrics: tuple[str, ...] = KEY_METRICS
    unscored_metrics: tuple[str, ...] = UNSCORED_METRICS

    def __post_init__(self) -> None:
        _check("resolution_points", self.resolution_points, 32, 10**6)
        _check("min_points", self.min_points, 4, 10**6)
        _check("smooth_fraction", self.smooth_fraction, 0.0, 0.5)
        _check("trend_fraction", self.trend_fraction, 0.01, 0.5)
        _check("n_pseudo_seeds", self.n_pseudo_seeds, 2, 1000)
        _check("n_boot", self.n_boot, 10, 100_000)
        _check("ci_level", self.ci_level, 0.5, 0.999)
        _check("dtw_band_fraction", self.dtw_band_fraction, 0.0, 1.0)
        _check("dtw_points", self.dtw_points, 8, 10**5)
        for name in ("floor_trend", "floor_shape", "floor_volatility", "floor_increments",
                     "floor_events"):
            _check(name, getattr(self, name), 1e-6, 10.0)
        _check("faithful_score", self.faithful_score, 0.0, 1.0)
        _check("diverged_score", self.diverged_score, 0.0, self.faithful_score)
        _check("partial_below", self.partial_below, 0.0, 1.0)
        _check("partial_min_metrics", self.partial_min_metrics, 1, 1000)
        _check("onset_tolerance_progress", self.onset_tolerance_progress, 0.0, 1.0)
        _check("event_window_progress", self.event_window_progress, 0.0, 1.0)
        _check("order_min_symptoms", self.order_min_symptoms, 2, 1000)
        _check("learn_min_sigma", self.learn_min_sigma, 0.0, 100.0)
        _check("learn_min_fraction", self.learn_min_fraction, 0.0, 1.0)
        _check("unfaithful_factor", self.unfaithful_factor, 0.0, 1.0)

    @property
    def buckets(self) -> int:
        """Buckets of the analysis grid (each keeps min and max: 2 points per bucket)."""
        return self.resolution_points // 2

    def replace(self, **values: Any) -> FidelityConfig:
        """A copy with some parameters changed (validated)."""
        return _from_mapping(values, base=self, origin="<replace>")


def _check(name: str, value: float, lo: float, hi: float) -> None:
    if not lo <= value <= hi:
        raise ConfigError(f"[compare] {name} = {value!r} is out of range; use a value in [{lo}, {hi}]")


def load_config(path: str | Path) -> FidelityConfig:
    """Read the ``[compare]`` table of a TOML file on top of the defaults.

    Raises :class:`~proxydiag.errors.ConfigError` naming the file and key for an unknown key, a
    value of the wrong type or out of range.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found; check the --config path") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc}); fix the file") from exc
    table = data.get("compare", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: [compare] must be a table of parameters")
    return _from_mapping(table, base=FidelityConfig(), origin=str(path))


def _from_mapping(table: Mapping[str, Any], *, base: FidelityConfig, origin: str) -> FidelityConfig:
    known = {f.name for f in fields(FidelityConfig)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"{origin}: unknown key compare.{key}; known: {', '.join(sorted(known))}")
        values[key] = _coerce(value, getattr(base, key), f"{origin}: compare.{key}")
    try:
        return dataclasses.replace(base, **values)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from exc


def _coerce(value: Any, default: Any, where: str) -> Any:
    if isinstance(default, tuple):
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings")
        return tuple(value)
    if isinstance(default, dict):
        if not isinstance(value, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()
        ):
            raise ConfigError(f"{where} must be a table of numbers")
        return {**default, **{str(k): float(v) for k, v in value.items()}}
    if isinstance(default, bool) or not isinstance(value, int | float) or isinstance(value, bool):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    return int(value) if isinstance(default, int) else float(value)
