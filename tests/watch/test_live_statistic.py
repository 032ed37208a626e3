"""The live guard and the streaming change statistic: a policy collapse is alerted a couple of
logged points after it breaks (within the issue's bound), the alert equals what the statistic
sees on the prefix, and lone fp16 overflows cost no re-fit while a real overflow still alerts
at once."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import collapse
from proxydiag.evaluate.watch import bound_steps
from proxydiag.frame import raw
from proxydiag.run.build import build_run
from proxydiag.synth import FaultSpec, Scenario, simulate
from proxydiag.synth.view import logged_steps, logged_values
from proxydiag.watch import Watcher
from proxydiag.watch.replay import replay


def _collapse_run(interval: int, seed: int, onset: int):  # type: ignore[no-untyped-def]
    n = 600
    sc = Scenario(name="pc", n_steps=n, group_seed=seed, fault=FaultSpec("policy_collapse", onset))
    sr = simulate(sc, seed=seed)
    steps = logged_steps(n, log_interval=interval)
    values = logged_values(sr, naming="verl", fmt="jsonl", log_interval=interval)
    keys = [k for k in values for _ in steps]
    return build_run(
        raw(
            np.tile(steps, len(values)),
            keys,
            np.concatenate([values[k] for k in values]),
        ),
        name="pc",
        source="t",
        fmt="test",
        attrs={"precision": "bf16"},
    )


@pytest.mark.parametrize(("interval", "seed"), [(1, 1), (5, 2), (10, 3), (10, 4)])
def test_a_policy_collapse_is_alerted_within_the_bound(interval: int, seed: int) -> None:
    onset = 250
    run = _collapse_run(interval, seed, onset)
    result = replay(run, every=1)
    first = next(a for a in result.alerts if a.label == "loss_divergence")
    assert first.raised_at_step - onset <= bound_steps(600, interval)
    # the statistic's own first alarm is what a re-fit at that step could see: the watcher
    # alerts no later than one level look (10 steps) and one log interval after it
    stat = collapse.alarm_step(run, DiagnoseConfig())
    assert stat is not None
    assert first.raised_at_step <= stat + 10 + interval


def _fp16_run(n: int, overflows: list[int], *, static_from: int | None = None):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    grad = np.exp(rng.normal(0, 0.1, n))
    scale = np.full(n, 65536.0)
    skipped = np.zeros(n)
    for s in overflows:
        grad[s] = math.inf
        skipped[s] = 1.0
        scale[s:] /= 2.0
        scale[s + 50 :] *= 2.0  # a scaler with a short growth interval wins it back
    if static_from is not None:
        grad[static_from:] = math.nan
        skipped[static_from:] = 1.0
    loss = 2.0 + rng.normal(0, 0.01, n)
    return {"grad_norm": grad, "loss_scale": scale, "skipped": skipped, "loss": loss}


def _feed(series: dict[str, np.ndarray], n: int) -> Watcher:
    w = Watcher(run="fp16", precision="fp16")
    for step in range(n):
        w.add(step, {k: float(v[step]) for k, v in series.items()})
        if step % 10 == 9:
            w.check()
    w.check()
    return w


def test_lone_fp16_overflows_cost_no_refit_and_raise_nothing() -> None:
    """A healthy fp16 run overflowing once every ~60 steps: each overflow is the scaler's
    ordinary work (one skipped step, the scale halved), judged at the next level look, not
    by a re-fit of its own."""
    n = 2000
    lone = list(range(200, n, 61))
    w = _feed(_fp16_run(n, lone), n)
    assert w.alerts == []
    # the periodic re-fits (every 128 steps) and level looks, not one per overflow
    assert w.fits < len(lone)


def test_a_static_scale_overflow_is_still_alerted_at_once() -> None:
    n = 600
    w = Watcher(run="fp16", precision="fp16")
    series = _fp16_run(n, list(range(200, 400, 61)), static_from=450)
    raised = None
    for step in range(n):
        w.add(step, {k: float(v[step]) for k, v in series.items()})
        for a in w.check():
            raised = raised or a
    assert raised is not None and raised.label == "gradient_overflow"
    # benign_streak_points = 3: the fourth overflow in a row is no lone overflow
    assert raised.onset_step == 450 and raised.raised_at_step <= 455


def test_crowded_overflows_are_not_lone() -> None:
    """Every other step overflowing is not the scaler's ordinary work: each re-fits."""
    n = 400
    crowded = list(range(300, 340, 2))
    w = _feed(_fp16_run(n, crowded), n)
    quiet = _feed(_fp16_run(n, []), n)
    assert w.fits > quiet.fits + len(crowded) // 2
