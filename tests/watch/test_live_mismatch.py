"""The live guard and the streaming mismatch statistic
(:mod:`proxydiag.diagnose.detectors.mismatch_shift`): a generated mismatch climb or step is
alerted as a precision fault within the issue's bound, no later than one level look after the
statistic's own alarm; healthy mismatch series of
several shapes (heavy-tailed noise, a slow benign drift, a sawtooth at weight syncs, fp16-like
spikes) never alarm, live or offline; and what a live watch raises does not depend on how the
points were split between checks."""

from __future__ import annotations

import random

import numpy as np
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import mismatch_shift
from proxydiag.diagnose.view import view
from proxydiag.evaluate.watch import bound_steps
from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.run.rows import steps_of
from proxydiag.synth import FaultSpec, Scenario, simulate
from proxydiag.synth.view import logged_steps, logged_values
from proxydiag.watch import Watcher
from proxydiag.watch.replay import replay

N_STEPS = 600


def _run(arrays: dict[str, np.ndarray], steps: np.ndarray, name: str) -> Run:
    keys = [k for k in arrays for _ in steps]
    return build_run(
        raw(np.tile(steps, len(arrays)), keys, np.concatenate(list(arrays.values()))),
        name=name,
        source="t",
        fmt="test",
        attrs={"precision": "bf16"},
    )


def _fault_run(variant: str, naming: str, interval: int, seed: int, onset: int) -> Run:
    sc = Scenario(
        name=variant,
        n_steps=N_STEPS,
        precision="bf16",
        group_seed=seed,
        fault=FaultSpec(variant, onset),
    )
    sr = simulate(sc, seed=seed)
    steps = logged_steps(N_STEPS, log_interval=interval)
    values = logged_values(sr, naming=naming, fmt="jsonl", log_interval=interval)
    return _run(values, steps, variant)


def _ar(rng: np.random.Generator, n: int, scale: float, phi: float = 0.7) -> np.ndarray:
    """AR(1) noise of marginal spread ``scale``."""
    e = rng.normal(0, 1, n)
    out = np.zeros(n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + e[i]
    return scale * out * np.sqrt(1 - phi**2)


#: mismatch metric sets as stacks log them, each as a function of the disagreement's fold m
STACKS = {
    "verl": lambda m, r, n: {
        "mismatch_prob_diff": 0.003 * m * np.exp(_ar(r, n, 0.12, 0.8)),
        "mismatch_k3": 3e-4 * m**2 * np.exp(_ar(r, n, 0.15)),
        "mismatch_corr": 1 - 7e-4 * m**3 * np.exp(_ar(r, n, 0.1)),
    },
    "slime": lambda m, r, n: {"mismatch_logp_diff": 0.02 * m * np.exp(_ar(r, n, 0.12, 0.8))},
    "trl": lambda m, r, n: {
        "mismatch_logp_diff": 0.02 * m * np.exp(_ar(r, n, 0.12, 0.8)),
        "mismatch_logp_diff_max": 1.5 * m**0.6 * np.exp(_ar(r, n, 0.15, 0.3)),
    },
    "nemo": lambda m, r, n: {
        "mismatch_prob_error": np.exp(0.004 * m * np.exp(_ar(r, n, 0.12, 0.8))),
    },
}


def _climb_run(stack: str, interval: int, seed: int, onset: int) -> Run:
    """A healthy RL run whose mismatch climbs from ``onset``: the disagreement grows linearly
    to 6-10× its level over 50-80 steps (at least 2.9× 30 steps in: a climb that stands out
    of the healthy noise's 2× within the bound), logged every ``interval`` steps in
    ``stack``'s metrics."""
    rng = np.random.default_rng(seed)
    steps = logged_steps(N_STEPS, log_interval=interval)
    t = steps.astype(np.float64)
    top, length = rng.uniform(6, 10), rng.uniform(50, 80)
    m = 1 + (top - 1) * np.clip((t - onset) / length, 0, 1)
    n = t.size
    arrays = {
        "loss": 0.2 + _ar(rng, n, 0.02),
        "grad_norm": 0.5 * np.exp(_ar(rng, n, 0.15)),
        "reward": 0.3 + 0.4 * (1 - np.exp(-t / 200)) + _ar(rng, n, 0.03),
        **STACKS[stack](m, rng, n),
    }
    return _run(arrays, steps, f"climb-{stack}")


CLIMBS = [(stack, interval, seed) for seed, stack in enumerate(STACKS) for interval in (1, 5, 10)]


@pytest.mark.parametrize(("stack", "interval", "seed"), CLIMBS)
def test_a_mismatch_climb_is_alerted_within_the_bound(stack: str, interval: int, seed: int) -> None:
    onset = 250 + 7 * seed
    run = _climb_run(stack, interval, seed, onset)
    result = replay(run, every=1)
    first = next(a for a in result.alerts if a.label == "precision_fault")
    assert 0 <= first.raised_at_step - onset <= bound_steps(N_STEPS, interval), first
    assert abs(first.onset_step - onset) <= max(3 * interval, 20), first
    # the statistic's own first alarm is what a re-fit at that step could see: the watcher
    # alerts no later than one level look (10 steps) and one log interval after it
    stat = mismatch_shift.alarm_step(run, DiagnoseConfig())
    assert stat is not None and stat >= onset
    assert first.raised_at_step <= stat + 10 + interval
    assert result.final.label == "precision_fault"


def _steady_climb_run(stack: str, interval: int, seed: int, onset: int) -> Run:
    """A healthy RL run whose mismatch climbs steadily from ``onset`` (linearly, 3-3.5× its
    level 30 steps in, no faster), logged sparsely: three or four points after the onset are
    all a sparse log holds within the bound."""
    rng = np.random.default_rng(100 + seed)
    steps = logged_steps(N_STEPS, log_interval=interval)
    t = steps.astype(np.float64)
    slope = rng.uniform(2.0, 2.5) / 30
    m = 1 + slope * np.clip(t - onset, 0, None)
    n = t.size
    arrays = {
        "loss": 0.2 + _ar(rng, n, 0.02),
        "reward": 0.3 + 0.4 * (1 - np.exp(-t / 200)) + _ar(rng, n, 0.03),
        **STACKS[stack](m, rng, n),
    }
    return _run(arrays, steps, f"steady-{stack}")


@pytest.mark.parametrize("interval", [5, 10])
def test_a_steady_climb_on_a_sparse_log_alarms_within_the_bound(interval: int) -> None:
    """A median of three points ten steps apart lags a climb by a log interval: on a sparse
    log the statistic reads a climb's last point, wherever the onset falls between two logged
    steps. Over every stack, onset offset and three noise draws: all alarm, at least 90%
    within the bound, none more than one log interval after it."""
    delays = []
    for stack in STACKS:
        for offset in range(0, interval, 2):
            for draw in range(3):
                onset = 300 + offset
                run = _steady_climb_run(stack, interval, 97 * draw + offset, onset)
                stat = mismatch_shift.alarm_step(run, DiagnoseConfig())
                assert stat is not None and stat >= onset, (stack, offset, draw)
                delays.append(stat - onset)
    bound = bound_steps(N_STEPS, interval)
    assert max(delays) <= bound + interval, delays
    assert sum(d <= bound for d in delays) >= 0.9 * len(delays), delays


def _bump_run(interval: int, seed: int) -> Run:
    """A healthy run whose mismatch jumps 4-8× at a step now and then (a batch of rare
    prompts) and comes back within a few steps (decaying by e every 1.5-3 steps)."""
    rng = np.random.default_rng(seed)
    steps = logged_steps(N_STEPS, log_interval=interval)
    t = steps.astype(np.float64)
    log_fold = np.zeros(t.size)
    for at in np.cumsum(rng.integers(60, 120, 8)):
        if at < N_STEPS:
            tau = rng.uniform(1.5, 3.0)
            size = np.log(rng.uniform(4, 8))
            log_fold += np.where(t >= at, size * np.exp(-(t - at) / tau), 0.0)
    n = t.size
    arrays = {
        "loss": 0.2 + _ar(rng, n, 0.02),
        "reward": 0.3 + 0.4 * (1 - np.exp(-t / 200)) + _ar(rng, n, 0.03),
        "mismatch_prob_diff": 0.003 * np.exp(log_fold + _ar(rng, n, 0.08, 0.5)),
        "mismatch_logp_diff": 0.02 * np.exp(log_fold + _ar(rng, n, 0.08, 0.5)),
    }
    return _run(arrays, steps, "bump")


@pytest.mark.parametrize("interval", [1, 2, 5])
def test_a_bump_that_comes_back_never_alarms(interval: int) -> None:
    """The level a change must hold is the median of the last 10 steps: a bump that is gone
    within a few steps does not stand, however tall."""
    cfg = DiagnoseConfig()
    for seed in range(10):
        assert mismatch_shift.alarm_step(_bump_run(interval, seed), cfg) is None, seed


@pytest.mark.parametrize(("naming", "interval", "seed"), [("verl", 1, 1), ("trl", 10, 3)])
def test_a_weight_sync_step_is_alerted_within_the_bound(
    naming: str, interval: int, seed: int
) -> None:
    """The simulator's broken weight sync (the mismatch 4-8× from one step on)."""
    onset = 250
    run = _fault_run("sync_step", naming, interval, seed, onset)
    result = replay(run, every=1)
    first = next(a for a in result.alerts if a.label == "precision_fault")
    assert 0 <= first.raised_at_step - onset <= bound_steps(N_STEPS, interval), first


def _healthy(shape: str, interval: int, seed: int) -> Run:
    """A healthy RL run (loss, grad norm, reward, entropy) whose mismatch metrics (a
    probability difference, k3 = its square's scale, a log-prob difference) carry noise of the
    given shape, within the healthy range all along:

    - ``heavy_tails``: correlated noise plus Student-t (3 degrees of freedom) draws on the log;
    - ``benign_drift``: a slow climb over the whole run to 2.2× (4.8× in k3), noisy;
    - ``sawtooth``: a 1.5× rise between weight syncs every 20-40 steps, reset at each;
    - ``fp16_spikes``: isolated one-step spikes of 5-30× every 30-60 steps (overflow steps),
      some of them NaN or inf.
    """
    rng = np.random.default_rng(seed)
    steps = logged_steps(N_STEPS, log_interval=interval)
    t = steps.astype(np.float64)
    n = steps.size

    def ar(scale: float, phi: float = 0.7) -> np.ndarray:
        return _ar(rng, n, scale, phi)

    log_fold = np.zeros(n)
    if shape == "heavy_tails":
        # a step's mean over a batch now and then dominated by a few extreme tokens
        noise = ar(0.08, 0.8) + 0.08 * rng.standard_t(3, n)
    else:
        noise = ar(0.12, 0.8)
    if shape == "benign_drift":
        log_fold = np.log(2.2) * t / t[-1]
    elif shape == "sawtooth":
        period = float(rng.integers(20, 41))
        log_fold = np.log(1.5) * np.mod(t, period) / period
    pd = 0.003 * np.exp(log_fold + noise)
    k3 = 3e-4 * np.exp(2 * log_fold + 1.5 * noise + ar(0.05))
    lpd = 0.02 * np.exp(log_fold + noise + ar(0.03))
    if shape == "fp16_spikes":
        at = np.cumsum(rng.integers(30, 61, 40))
        at = np.searchsorted(t, at[at < t[-1]])
        fold = np.exp(rng.uniform(np.log(5), np.log(30), at.size))
        pd[at] *= fold
        k3[at] *= fold**2
        lpd[at] *= fold
        bad = at[rng.random(at.size) < 0.3]
        pd[bad], k3[bad] = np.nan, np.inf
    arrays = {
        "loss": 0.2 + ar(0.02),
        "grad_norm": 0.5 * np.exp(ar(0.15)),
        "reward": 0.3 + 0.4 * (1 - np.exp(-t / 200)) + ar(0.03),
        "entropy": 1.2 * np.exp(-t / 2000 + ar(0.03)),
        "mismatch_prob_diff": pd,
        "mismatch_k3": k3,
        "mismatch_logp_diff": lpd,
    }
    return _run(arrays, steps, f"{shape}-{interval}-{seed}")


SHAPES = ("heavy_tails", "benign_drift", "sawtooth", "fp16_spikes")


@pytest.mark.parametrize("shape", SHAPES)
def test_healthy_mismatch_series_never_alarm(shape: str) -> None:
    cfg = DiagnoseConfig()
    for interval in (1, 5, 10):
        for seed in range(12):
            run = _healthy(shape, interval, seed)
            assert mismatch_shift.alarm_step(run, cfg) is None, (shape, interval, seed)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("interval", [1, 10])
def test_healthy_mismatch_series_raise_nothing_live(shape: str, interval: int) -> None:
    run = _healthy(shape, interval, seed=100)
    result = replay(run, every=1)
    assert [a.to_dict() for a in result.alerts] == [], shape
    assert result.final.label == "healthy"
    assert diagnose(run).label == "healthy"


def _chunked(run: Run, *, seed: int) -> list[tuple[str, int | None, int]]:
    """Alerts of a watcher fed 3-10 logged steps per check, a step sometimes split in two."""
    rng = random.Random(seed)
    w = Watcher(run=run.id, name=run.name, precision="bf16")
    rows = list(steps_of(run))
    alerts, i = [], 0
    while i < len(rows):
        n = rng.randint(3, 10)
        for step, metrics in rows[i : i + n]:
            items = list(metrics.items())
            if rng.random() < 0.2 and len(items) > 1:
                cut = rng.randint(1, len(items) - 1)
                w.add(step, dict(items[:cut]))
                alerts += w.check()
                w.add(step, dict(items[cut:]))
            else:
                w.add(step, metrics)
        i += n
        alerts += w.check()
    alerts += w.close()
    return [(a.label, a.onset_step, a.raised_at_step) for a in alerts]


@pytest.mark.parametrize(("variant", "interval"), [("gradual_climb", 1), ("sync_step", 5)])
def test_live_chunks_raise_what_replay_raises(variant: str, interval: int) -> None:
    run = _fault_run(variant, "verl", interval, seed=7, onset=220)
    expected = [(a.label, a.onset_step, a.raised_at_step) for a in replay(run, every=1).alerts]
    assert expected and expected[0][0] == "precision_fault"
    for seed in range(2):
        assert _chunked(run, seed=seed) == expected, seed


def test_the_onset_is_never_after_the_alarm() -> None:
    """A maximum logged every 10 steps that climbs, dips to its early level for one point and
    is high again at the point that alarms: the centred median of 3 at the alarm is below the
    onset's floor, and the onset is the alarm point, never past it (an index past the series'
    end stopped a live watch of a generated run). Checked over noise draws and dip depths."""
    cfg = DiagnoseConfig()
    steps = logged_steps(N_STEPS, log_interval=10)
    t = steps.astype(np.float64)
    hits = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        y = 1.5 * np.exp(_ar(rng, t.size, 0.15, 0.3))
        climb = (t >= 300) & (t < 370)
        y[climb] *= np.exp(np.linspace(0.4, 1.1, int(climb.sum())))
        y[t == 370] = 1.5 * rng.uniform(0.8, 1.0)  # one point back at its early level
        y[t == 380] = 1.5 * np.exp(rng.uniform(1.1, 1.3))
        keep = t <= 380
        run = _run({"mismatch_logp_diff_max": y[keep]}, steps[keep], f"dip-{seed}")
        s = view(run).get("mismatch_logp_diff_max")
        assert s is not None
        hit = mismatch_shift.shift(s, cfg.mismatch)
        if hit is not None:
            hits += 1
            assert hit.onset <= hit.alarm, (seed, hit)
            assert mismatch_shift.detect(run, cfg)[0].onset_step <= 380
    assert hits >= 10
