"""`simulate(scenario, *, seed) -> SynthRun`: one run in memory, with its ground truth."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl

from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.synth import benign, fault_effects
from proxydiag.synth.dynamics import Dynamics, draw_dynamics
from proxydiag.synth.effects import Effects
from proxydiag.synth.model import simulate_metrics, simulate_routing
from proxydiag.synth.proxy import cost_per_step, prune, with_dynamics
from proxydiag.synth.scenario import VARIANT_SEED, Scenario, Truth, named

#: wall clocks start in Nov 2023 plus an offset derived from the seeds (never the real clock)
_EPOCH_S = 1_700_000_000.0


@dataclass(frozen=True)
class SynthRun:
    """A simulated run: per-step canonical values, wall times, the truth and the `Run`."""

    scenario: Scenario
    seed: int
    truth: Truth
    values: dict[str, np.ndarray] = field(repr=False)
    wall_time: np.ndarray = field(repr=False)
    dynamics: Dynamics = field(repr=False)
    spike_steps: tuple[int, ...] = ()

    @property
    def n_steps(self) -> int:
        return self.scenario.n_steps

    @property
    def steps(self) -> np.ndarray:
        return np.arange(1, self.n_steps + 1, dtype=np.int64)

    @property
    def attrs(self) -> dict[str, object]:
        """The run's metadata, as its ``proxydiag.json`` sidecar states it."""
        sc = self.scenario
        return {
            "name": sc.name,
            "role": sc.role,
            "group": sc.group or sc.name,
            "seed": self.seed,
            "experts_kept": sc.experts_kept,
            "experts_total": sc.experts_total,
            "cost_per_step": cost_per_step(sc.kept_fraction),
            "precision": sc.precision,
        }

    @cached_property
    def run(self) -> Run:
        """The canonical `Run` (every metric at every step; keys are canonical names)."""
        names = sorted(self.values)
        n = self.n_steps
        frame = raw(
            np.tile(self.steps, len(names)),
            np.repeat(np.array(names, dtype=object), n),
            np.concatenate([self.values[k] for k in names]),
            np.tile(self.wall_time, len(names)),
        )
        attrs = dict(self.attrs)
        attrs["log_interval"] = 1
        return build_run(
            frame,
            name=self.scenario.name,
            source=f"synth:{self.scenario.name}",
            fmt="synth",
            attrs=attrs,
        )

    def frame(self) -> pl.DataFrame:
        """The canonical frame of :attr:`run`."""
        return self.run.frame


def simulate(scenario: Scenario | str, *, seed: int) -> SynthRun:
    """Simulate one run; the same scenario and seed give identical values.

    ``scenario`` is a :class:`Scenario` or a name from :data:`~proxydiag.synth.SCENARIOS`.

    Examples
    --------
    >>> sr = simulate("fp16_scaler_collapse", seed=0)
    >>> sr.truth.label, sr.truth.onset_step
    ('gradient_overflow', 200)
    >>> float(sr.values["loss_scale"][-1]), int(sr.values["skipped"][200:].sum()) == 300
    (1.0, True)
    """
    sc = named(scenario) if isinstance(scenario, str) else scenario
    dyn = _dynamics(sc)
    n = sc.n_steps
    eff = Effects.neutral(n)
    quiet = sc.fault.onset_step if sc.fault else None
    noise_rng = np.random.default_rng(
        np.random.SeedSequence([sc.group_seed, int(seed), sc.experts_kept, 17])
    )
    spikes = benign.add_spikes(eff, noise_rng, quiet_from_step=quiet)
    if sc.fault is not None:
        # fault parameters are shared by all seeds of a group and by the proxies that
        # reproduce the fault, at its onset or a little off it (or late, or early): the same
        # fault (e.g. the direction entropy takes in a divergence), other noise and pruned
        # dynamics. Not seeded by the onset: a proxy reproducing at 226 what the full run
        # has at 229 drew another fault, half the time with entropy going the other way
        fault_rng = np.random.default_rng(
            np.random.SeedSequence([sc.group_seed, VARIANT_SEED[sc.fault.variant], 29])
        )
        fault_effects.inject(eff, sc.fault, fault_rng)
    values = simulate_metrics(dyn, eff, precision=sc.precision, rng=noise_rng)
    if sc.routing:  # its own stream: the other metrics are those of the same run without
        route_rng = np.random.default_rng(
            np.random.SeedSequence([sc.group_seed, int(seed), sc.experts_kept, 41])
        )
        values.update(simulate_routing(dyn, eff, rng=route_rng))
    offset = (sc.group_seed * 7919 + int(seed) * 104_729 + sc.experts_kept * 31) % 20_000_000
    wall = _EPOCH_S + offset + np.cumsum(values["step_time"])
    return SynthRun(sc, int(seed), sc.truth, values, wall, dyn, tuple(spikes))


def _dynamics(sc: Scenario) -> Dynamics:
    dyn = draw_dynamics(sc.group_seed, n_steps=sc.n_steps)
    if sc.experts_kept < sc.experts_total:
        dyn = prune(dyn, kept_fraction=sc.kept_fraction)
    return with_dynamics(dyn, sc.dynamics)
