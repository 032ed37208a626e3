"""Replay a finished run into a :class:`~proxydiag.watch.watcher.Watcher`, as if it were live.

The run's points are fed in step order under the keys they were logged with (so aliases and
cumulative counters are resolved as they would be live), ``every`` distinct logged steps per
check. What comes out is what ``proxydiag watch --replay`` prints: the alerts, each at the step
where it would have been raised, then the final offline diagnosis of the whole run.

>>> import numpy as np
>>> from proxydiag.frame import raw
>>> from proxydiag.run.build import build_run
>>> steps = np.arange(300)
>>> grad = np.where(steps < 200, 1.0, np.inf)
>>> r = build_run(raw(np.r_[steps, steps], ["grad_norm"] * 300 + ["loss"] * 300,
...                   np.r_[grad, np.full(300, 2.0)]), name="demo", source="demo", fmt="test",
...               attrs={"precision": "bf16"})
>>> result = replay(r, every=10)
>>> [(a.label, a.onset_step, a.raised_at_step) for a in result.alerts], result.final.label
([('gradient_overflow', 200, 201)], 'gradient_overflow')
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.result import Diagnosis
from proxydiag.errors import ConfigError
from proxydiag.metrics import AliasTable
from proxydiag.run import Run
from proxydiag.run.rows import steps_of
from proxydiag.watch.alerts import Alert
from proxydiag.watch.checkpoints import Checkpoints
from proxydiag.watch.rules import WatchLimits
from proxydiag.watch.watcher import Watcher


@dataclass(frozen=True)
class Replayed:
    """The alerts a replay raised, the final diagnosis, and what the watching cost."""

    run: Run
    alerts: tuple[Alert, ...]
    final: Diagnosis
    #: CPU seconds spent in the watcher (the final offline diagnosis excluded)
    cpu_seconds: float
    #: distinct logged steps fed
    steps_fed: int
    #: largest number of points the watcher held at once
    peak_points: int
    fits: int


def replay(
    run: Run,
    *,
    every: int = 1,
    config: DiagnoseConfig | str | Path | None = None,
    aliases: AliasTable | None = None,
    limits: WatchLimits | None = None,
    checkpoints: Checkpoints | None = None,
) -> Replayed:
    """Feed ``run`` to a watcher ``every`` logged steps per check (see the module docstring)."""
    if every < 1:
        raise ConfigError(f"--every must be at least 1, not {every}")
    precision = run.attrs.get("precision")
    watcher = Watcher(
        run=run.id,
        name=run.name,
        config=config,
        aliases=aliases,
        precision=str(precision) if precision is not None else None,
        limits=limits,
        checkpoints=checkpoints,
    )
    fed, peak, cpu = 0, 0, 0.0
    alerts: list[Alert] = []
    for step, metrics in steps_of(run):
        start = time.process_time()
        watcher.add(step, metrics)
        fed += 1
        if fed % every == 0:
            alerts += watcher.check()
            peak = max(peak, watcher.held_points)
        cpu += time.process_time() - start
    start = time.process_time()
    alerts += watcher.check()
    alerts += watcher.close()
    cpu += time.process_time() - start
    peak = max(peak, watcher.held_points)
    return Replayed(run, tuple(alerts), watcher.final(run), cpu, fed, peak, watcher.fits)
