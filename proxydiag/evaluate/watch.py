"""``proxydiag bench watch DIR``: score the live guard against a labelled corpus, replayed.

Every run of ``labels.json`` is replayed into a watcher ``every`` logged steps per check
(:func:`proxydiag.watch.replay.replay`). Per run: the first alert of the true class and its
delay (raised − true onset, in steps and % of the run), a missed fault, a false alert on a
healthy run, whether the last alert agrees with the final offline label, and the
**prefix oracle**: offline ``diagnose`` run on the prefix at every check, whose first finding
of the true class (with an onset no earlier than the true onset minus the bench tolerance,
so that a spurious early finding does not count) is the best a watcher re-running the
offline detectors could do; and, for a diverging run or a precision fault, the **statistic**:
the first step at which the streaming change statistic of its class says so on the run so far
(the first prefix that alarms: what a check at that step could have seen):
:mod:`proxydiag.diagnose.detectors.collapse` (a CUSUM of each RL symptom on the run's own
noise) for a divergence, :mod:`proxydiag.diagnose.detectors.mismatch_shift` (a CUSUM of each
mismatch quantity's log against its early noise) for a precision fault. Cost:
CPU per logged step of the watcher, and of re-running the offline detectors on the whole prefix
at every check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import collapse, mismatch_shift
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.errors import AnalysisError
from proxydiag.evaluate.diagnose import load_labels, tolerance
from proxydiag.run import Run
from proxydiag.watch.replay import replay
from proxydiag.watch.window import verdict

if TYPE_CHECKING:
    from proxydiag.fleet.executor import Executor


@dataclass(frozen=True)
class WatchScore:
    """One replayed run."""

    run: str
    truth: str
    onset: int | None
    span_steps: int
    log_interval: int
    first_alert: int | None  # raised_at of the first alert of the true class
    oracle: int | None
    statistic: int | None  # the change statistic's first alarm (divergence, precision fault)
    false_alert: bool
    agrees: bool
    watch_ms_per_step: float
    oracle_ms_per_step: float | None
    peak_points: int

    @property
    def delay(self) -> int | None:
        if self.first_alert is None or self.onset is None:
            return None
        return self.first_alert - self.onset

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "truth": self.truth,
            "onset_step": self.onset,
            "first_alert_step": self.first_alert,
            "delay_steps": self.delay,
            "oracle_step": self.oracle,
            "statistic_step": self.statistic,
            "false_alert": self.false_alert,
            "last_alert_agrees": self.agrees,
            "span_steps": self.span_steps,
            "watch_ms_per_step": round(self.watch_ms_per_step, 4),
            "oracle_ms_per_step": None
            if self.oracle_ms_per_step is None
            else round(self.oracle_ms_per_step, 4),
            "peak_points": self.peak_points,
        }


def score_run(
    run: Run, entry: dict[str, Any], *, every: int, oracle: bool, config: DiagnoseConfig
) -> WatchScore:
    """Replay one run and score it (see the module docstring)."""
    result = replay(run, every=every, config=config)
    truth = str(entry["label"])
    onset = entry.get("onset_step")
    interval = int(entry.get("log_interval") or 1)
    span = int((result.final.last_step or 0) - (result.final.first_step or 0) + interval)
    first = next((a.raised_at_step for a in result.alerts if a.label == truth), None)
    last = result.alerts[-1].label if result.alerts else "healthy"
    found, oracle_ms = (None, None)
    if oracle and onset is not None and truth != "healthy":
        found, oracle_ms = _oracle(
            run,
            truth,
            every=every,
            config=config,
            earliest=int(onset) - tolerance(span_steps=span, log_interval=interval),
        )
    statistic = _statistic(run, config, truth)
    return WatchScore(
        str(entry.get("run", run.name)),
        truth,
        None if onset is None else int(onset),
        span,
        interval,
        first,
        found,
        statistic,
        truth == "healthy" and bool(result.alerts),
        last == result.final.label,
        1000 * result.cpu_seconds / max(result.steps_fed, 1),
        oracle_ms,
        result.peak_points,
    )


def _oracle(
    run: Run, truth: str, *, every: int, config: DiagnoseConfig, earliest: float
) -> tuple[int | None, float]:
    """The first check at which offline diagnose on the prefix finds the true class."""
    rv = view(run)
    steps = np.unique(np.concatenate([s.steps for s in rv.series.values()] or [np.zeros(0)]))
    ticks = [*steps[every - 1 :: every].tolist(), *([int(steps[-1])] if steps.size else [])]
    start = time.process_time()
    found = None
    for t in ticks:
        v = verdict(_prefix(rv, int(t)), config)
        if v.label == truth and v.onset_step is not None and v.onset_step >= earliest:
            found = int(t)
            break
    spent = time.process_time() - start
    checked = ticks.index(found) + 1 if found is not None else len(ticks)
    return found, 1000 * spent / max(checked * every, 1)


#: class -> the streaming change statistic that may alert it before the change fits
STATISTICS = {
    "loss_divergence": collapse.alarm_step,
    "precision_fault": mismatch_shift.alarm_step,
}


def _statistic(run: Run, config: DiagnoseConfig, truth: str) -> int | None:
    """The first logged step at which the class's statistic alarms on the run so far: its
    alarm on the whole run, then the logged steps after it until a prefix alarms too (the
    warm-up the collapse statistic skips is a share of what it has seen)."""
    alarm_step = STATISTICS.get(truth)
    if alarm_step is None:
        return None
    rv = view(run)
    first = alarm_step(rv, config)
    if first is None:
        return None
    steps = np.unique(np.concatenate([s.steps for s in rv.series.values()]))
    for t in steps[steps >= first][:STATISTIC_LOOKAHEAD].tolist():
        if alarm_step(_prefix(rv, int(t)), config) is not None:
            return int(t)
    return None


#: logged steps after the whole run's alarm searched for the first prefix that alarms
STATISTIC_LOOKAHEAD = 64


def _prefix(rv: RunView, last: int) -> RunView:
    series = {
        k: Series(k, s.steps[s.steps <= last], s.values[s.steps <= last])
        for k, s in rv.series.items()
    }
    return RunView(series, rv.first_step, last, rv.mapping, rv.precision)


def summarise(scores: list[WatchScore]) -> dict[str, Any]:
    """Per class: median delay (steps, % of run), misses, vs the oracle; healthy: false alerts."""
    per_class: dict[str, Any] = {}
    for c in sorted({s.truth for s in scores} - {"healthy"}):
        mine = [s for s in scores if s.truth == c]
        delays = [d for s in mine if (d := s.delay) is not None]
        pct = [100 * d / s.span_steps for s in mine if (d := s.delay) is not None]
        vs = [
            s.first_alert - s.oracle
            for s in mine
            if s.first_alert is not None and s.oracle is not None
        ]
        oracle_delays = [
            s.oracle - s.onset for s in mine if s.oracle is not None and s.onset is not None
        ]
        statistic_delays = [
            s.statistic - s.onset for s in mine if s.statistic is not None and s.onset is not None
        ]
        per_class[c] = {
            "runs": len(mine),
            "alerted": len(delays),
            "missed": len(mine) - len(delays),
            "median_delay_steps": _median(delays),
            "median_delay_pct": _median(pct),
            "median_oracle_delay_steps": _median(oracle_delays),
            "median_later_than_oracle_steps": _median(vs),
            "max_later_than_oracle_steps": max(vs) if vs else None,
            "median_statistic_delay_steps": _median(statistic_delays),
            "statistic_found": len(statistic_delays),
            "within_bound": sum(
                s.delay is not None and s.delay <= bound_steps(s.span_steps, s.log_interval)
                for s in mine
            ),
        }
    healthy = [s for s in scores if s.truth == "healthy"]
    faults = [s for s in scores if s.truth != "healthy"]
    oracle_cost = [s.oracle_ms_per_step for s in scores if s.oracle_ms_per_step is not None]
    return {
        "n_runs": len(scores),
        "per_class": per_class,
        "alerted_fraction": round(
            sum(s.first_alert is not None for s in faults) / max(len(faults), 1), 4
        ),
        "healthy_runs": len(healthy),
        "false_alerts": sum(s.false_alert for s in healthy),
        "last_alert_agrees_fraction": round(sum(s.agrees for s in scores) / max(len(scores), 1), 4),
        "watch_ms_per_step_median": _median([s.watch_ms_per_step for s in scores]),
        "oracle_ms_per_step_median": _median(oracle_cost),
        "peak_points_max": max((s.peak_points for s in scores), default=0),
        "runs": [s.to_dict() for s in scores],
    }


def bound_steps(span_steps: int, log_interval: int) -> float:
    """How late a live alert may come: max(40 steps, 3 log intervals, 5% of the run)."""
    return max(40.0, 3.0 * log_interval, 0.05 * span_steps)


def _median(values: list[float] | list[int]) -> float | None:
    return round(float(np.median(values)), 2) if values else None


def score(
    corpus: str | Path,
    *,
    every: int = 10,
    oracle: bool = True,
    config: DiagnoseConfig | None = None,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Replay every run of ``corpus/labels.json`` and summarise (see :func:`summarise`); each
    run is a work item on ``executor`` (in this process by default). A run that cannot be
    read or replayed ends the evaluation, naming it."""
    from proxydiag.fleet.executor import Serial

    labels = load_labels(corpus)
    task = partial(_replay_item, every, oracle, config or DiagnoseConfig())
    items = [
        (run_id, str(labels.run_path(run_id)), entry)
        for run_id, entry in sorted(labels.runs.items())
    ]
    scores = []
    for outcome in (executor or Serial()).map(task, items):
        if not outcome.ok:
            raise AnalysisError(f"{outcome.item[1]}: {outcome.reason}")
        scores.append(outcome.value)
    return summarise(scores)


def _replay_item(
    every: int, oracle: bool, config: DiagnoseConfig, item: tuple[str, str, dict[str, Any]]
) -> WatchScore:
    """One corpus run as a work item: read it and score its replay."""
    from proxydiag.ingest import read_run

    run_id, path, entry = item
    return score_run(
        read_run(path), {**entry, "run": run_id}, every=every, oracle=oracle, config=config
    )


def text(summary: dict[str, Any]) -> str:
    """The summary as a table for people."""
    lines = [
        f"{'class':<20}{'runs':>5}{'missed':>7}{'in bound':>9}{'delay':>8}{'delay%':>8}"
        f"{'oracle':>8}{'vs oracle':>10}{'statistic':>10}"
    ]
    for c, v in summary["per_class"].items():
        lines.append(
            f"{c:<20}{v['runs']:>5}{v['missed']:>7}{v['within_bound']:>9}"
            f"{_fmt(v['median_delay_steps']):>8}"
            f"{_fmt(v['median_delay_pct']):>8}{_fmt(v['median_oracle_delay_steps']):>8}"
            f"{_fmt(v['median_later_than_oracle_steps']):>10}"
            f"{_fmt(v['median_statistic_delay_steps']):>10}"
        )
    lines.append(
        "delays are medians in steps after the true onset; in bound: alerted within max(40 "
        "steps, 3 log intervals, 5% of the run); statistic: the first alarm of the class's "
        "streaming CUSUM (policy collapse for divergence, mismatch shift for precision "
        "faults; runs where it fires); oracle: offline diagnose on the prefix, every check"
    )
    lines.append(
        f"faults alerted: {summary['alerted_fraction']:.0%}; false alerts on "
        f"{summary['healthy_runs']} healthy runs: {summary['false_alerts']}; last alert "
        f"agrees with the final label: {summary['last_alert_agrees_fraction']:.0%}"
    )
    lines.append(
        f"CPU per logged step: watcher {_fmt(summary['watch_ms_per_step_median'])} ms, "
        f"offline diagnose re-run every check {_fmt(summary['oracle_ms_per_step_median'])} "
        f"ms (medians); most points held {summary['peak_points_max']}"
    )
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


__all__ = ["WatchScore", "bound_steps", "score", "score_run", "summarise", "text"]
