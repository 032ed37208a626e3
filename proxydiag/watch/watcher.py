"""`Watcher`: streaming diagnosis of one run, with bounded state and causal alerts.

Points arrive with :meth:`Watcher.add` (a step and any subset of metrics, raw or canonical
names); :meth:`Watcher.check` takes them in a logged step at a time and returns the alerts
new since the last check (:meth:`update` does both), so what is raised, and at which step,
does not depend on how the points were split between checks. The watcher keeps, per metric, a
bounded memory (:mod:`proxydiag.watch.buffers`) and cheap triggers
(:mod:`proxydiag.watch.triggers`); when one fires, or every ``periodic_steps`` new steps, it
re-runs the offline detectors on that memory (:mod:`proxydiag.watch.window`). So the cost of
a logged step is proportional to the metrics that got new points, plus a bounded re-fit when
something looks wrong; never to the run's length.

At the end of a run, :meth:`Watcher.final` is the offline :func:`~proxydiag.diagnose.api.diagnose`
of the whole run, once.

>>> import math
>>> w = Watcher(run="demo", precision="bf16")
>>> raised = []
>>> for step in range(300):
...     grad = 1.0 if step < 200 else math.inf
...     raised += w.update(step, {"grad_norm": grad, "loss": 2.0})
>>> [(a.label, a.onset_step) for a in raised], raised[0].raised_at_step < 220
([('gradient_overflow', 200)], True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from proxydiag.diagnose.api import diagnose, metrics_read
from proxydiag.diagnose.config import DiagnoseConfig, load_config
from proxydiag.diagnose.detectors.nonfinite import FP16
from proxydiag.diagnose.result import Diagnosis
from proxydiag.diagnose.taxonomy import Verdict
from proxydiag.diagnose.view import RunView
from proxydiag.metrics import SKIP_COUNTERS, AliasTable
from proxydiag.run import Run
from proxydiag.watch import triggers
from proxydiag.watch.alerts import Alert, alert_from_dict
from proxydiag.watch.buffers import MetricBuffer
from proxydiag.watch.checkpoints import Checkpoints
from proxydiag.watch.rules import GROWTH, WatchLimits, calibration_hold, number, router_lead
from proxydiag.watch.window import verdict, window_view

#: grad-norm points looked back on: more than [scaler] benign_streak_points overflows among them
#: is no lone overflow
CROWD_POINTS = 8


def _scheduled(streak: int, limits: WatchLimits) -> bool:
    """Re-fit on step ``streak`` of a suspicion: its first ``eager_checks`` steps, then
    steps 2^k (an overflow streak and a level move alike)."""
    return 0 < streak <= limits.eager_checks or streak & (streak - 1) == 0


class Watcher:
    """Streaming diagnosis of one run (see the module docstring).

    Parameters
    ----------
    run, name
        The run's id and display name, copied into every alert.
    config
        The offline diagnosis parameters (a :class:`DiagnoseConfig` or a TOML path).
    aliases
        The alias table raw keys are resolved with (default: the built-in one).
    precision
        ``fp16``, ``bf16`` ... when known (the loss scaler's calibration is judged by it).
    checkpoints
        The run's checkpoints: alerts then say where to go back to.
    """

    def __init__(
        self,
        *,
        run: str = "run",
        name: str | None = None,
        config: DiagnoseConfig | str | Path | None = None,
        aliases: AliasTable | None = None,
        precision: str | None = None,
        limits: WatchLimits | None = None,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        self.run, self.name = run, name if name is not None else run
        self.config = (
            config
            if isinstance(config, DiagnoseConfig)
            else (load_config(config) if config is not None else DiagnoseConfig())
        )
        self.aliases = aliases or AliasTable.default()
        #: the metrics held: what the detectors and the taxonomy declare they read
        self.reads = metrics_read(self.config)
        self.precision = precision.strip().lower() if precision else None
        self.limits = limits or WatchLimits()
        self.checkpoints = checkpoints
        self.alerts: list[Alert] = []
        self._buffers: dict[str, MetricBuffer] = {}
        self._names: dict[str, str] = {}
        self._totals: dict[str, float] = {}  # last value of each cumulative counter
        self._first: int | None = None
        self._last: int | None = None
        self._touched: set[str] = set()
        self._pending: str | None = None
        self._lone = False  # the pending suspicion is a loss scaler's ordinary work
        self._queue: list[tuple[int, Mapping[str, float]]] = []
        self._judged: int | None = None  # the last step judged
        self._since_fit = 0
        self._streak = 0
        self._point_streak = 0
        self._next_level: int | None = None  # the step the levels are looked at next
        self._sizes: dict[str, float] = {}  # trigger move sizes at the last re-fit
        #: re-fits done (for benchmarks and tests)
        self.fits = 0

    @property
    def last_step(self) -> int | None:
        """The largest step taken in so far (points fed since the last check wait for it)."""
        return self._last

    @property
    def held_points(self) -> int:
        """Points held in memory now, over all metrics (bounded)."""
        return sum(b.size for b in self._buffers.values())

    def update(self, step: int, metrics: Mapping[str, float]) -> list[Alert]:
        """:meth:`add` then :meth:`check`."""
        self.add(step, metrics)
        return self.check()

    def add(self, step: int, metrics: Mapping[str, float]) -> None:
        """Feed the values logged at ``step`` (any subset of metrics; non-numbers are ignored).

        A step at or before the last one a metric of the row already holds is a restart from a
        checkpoint: the points at and after it are forgotten and replaced by the new ones. A
        metric behind the others (its earlier steps arriving after theirs) only catches up.
        Points are queued and taken in, a logged step at a time, by the next :meth:`check`.
        """
        self._queue.append((int(step), metrics))

    def _take(self, step: int, metrics: Mapping[str, float]) -> None:
        """Take in the values logged at ``step`` (see :meth:`add`)."""
        if self._last is not None and step < self._last and self._relogged(step, metrics):
            for buf in self._buffers.values():
                buf.rewind(step)
            self._last, self._judged = step, step - 1
        self._first = step if self._first is None else min(self._first, step)
        self._last = step if self._last is None else max(self._last, step)
        for key, raw in metrics.items():
            value = number(raw)
            if value is None:
                continue
            self._add_point(self._name(key), step, value)

    def _relogged(self, step: int, metrics: Mapping[str, float]) -> bool:
        """True when a metric of the row already holds a point at or after ``step``: the run
        restarted from a checkpoint. A metric only catching up (an MLflow metric file or REST
        history a poll read behind the others, a step's points split between polls) is not a
        restart, and rewinding for it would forget the points the others logged since."""
        for key in metrics:
            name = self._names.get(key)  # a key never taken in has no points
            buf = self._buffers.get(name) if name is not None else None
            if buf is not None and buf.last_step is not None and buf.last_step >= step:
                return True
        return False

    def _add_point(self, name: str, step: int, value: float) -> None:
        if name not in self.reads:
            return  # only the metrics the detectors read are held
        if self.aliases.counter(name) == "cumulative":
            last = self._totals.get(name)
            self._totals[name] = value
            value = value - last if last is not None and value >= last else value
        buf = self._buffers.get(name)
        if buf is None:
            lim = self.limits
            buf = self._buffers[name] = MetricBuffer(
                head_points=lim.head_points,
                history_points=lim.history_points,
                recent_points=lim.recent_points,
            )
        elif buf.last_step is not None and step <= buf.last_step:
            buf.rewind(step)
        previous = buf.last_value
        buf.append(step, value)
        self._touched.add(name)
        reason = triggers.point(name, value, previous, nonfinite=self.config.nonfinite.metrics)
        if reason is not None and (self._pending is None or self._lone):
            # a suspicion a loss scaler's ordinary work may explain gives way to any other
            self._pending, self._lone = reason, self._scaler_work(name, value, previous)

    def _scaler_work(self, name: str, value: float, previous: float | None) -> bool:
        """True when a suspicious point is what an fp16 loss scaler does on a lone overflow:
        a non-finite grad norm, one skipped step, or a scale halved (not to its floor), in a
        run that is fp16."""
        if not ("loss_scale" in self._buffers or (self.precision or "").startswith(FP16)):
            return False
        if name == "grad_norm":
            return not math.isfinite(value)
        if name in SKIP_COUNTERS:
            return value == 1.0  # one step skipped (a cumulative counter: its increment)
        return name == "loss_scale" and previous is not None and value >= max(previous / 2.0, 2.0)

    def _benign_streak(self) -> bool:
        """The overflow streak is short and the last points are not crowded with overflows."""
        limit = self.config.scaler.benign_streak_points
        if self._point_streak > limit:
            return False
        grad = self._buffers.get("grad_norm")
        if grad is None:
            return True
        recent = grad.last(CROWD_POINTS)
        return int(np.count_nonzero(~np.isfinite(recent))) <= limit

    def _name(self, key: str) -> str:
        found = self._names.get(key)
        if found is None:
            # resolve against the keys seen so far: names already given stay
            resolved = self.aliases.resolve([*self._names, key])
            taken = set(self._names.values())
            found = resolved[key] if resolved[key] not in taken else key
            self._names[key] = found
        return found

    def check(self) -> list[Alert]:
        """The alerts new since the last check.

        The points fed since the last check are taken in a logged step at a time, and each
        step is judged on the points up to it, as if the watcher had been checked after every
        logged step: what is raised, and at which step, does not depend on how the points
        were split between checks (a tail's ticks, a trainer's logging calls). See the module
        docstring for when a step re-fits.
        """
        queue, self._queue = self._queue, []
        alerts: list[Alert] = []
        for i, (step, metrics) in enumerate(queue):
            self._take(step, metrics)
            if i + 1 == len(queue) or queue[i + 1][0] != step:
                alerts += self._judge()
        return alerts

    def _judge(self) -> list[Alert]:
        """Judge the step just taken in: re-fit when a trigger says so (see the module
        docstring)."""
        assert self._last is not None
        if self._judged is not None and self._last <= self._judged and not self._pending:
            return []  # more points of a step already judged, none of them suspicious
        if self._judged is None or self._last > self._judged:
            self._since_fit += 1
        self._judged = self._last
        point, self._pending = self._pending, None
        lone, self._lone = self._lone, False
        self._point_streak = self._point_streak + 1 if point else 0
        # until an overflow is alerted, every suspicious point (a non-finite value, a skip, a
        # falling scale) re-fits at once (a scale that halves from 4096 to 1 in 12 steps is
        # confirmed on the 10th); after, on its streak's first steps and 2^k. A lone fp16
        # overflow (the scaler skipping a step and halving its scale, no more than
        # [scaler] benign_streak_points in a row, not crowded) cannot change the verdict: it
        # waits for the next look (a healthy fp16 run overflows every few dozen steps, and
        # re-fitting for each cost it 37 of its 73 re-fits)
        overflowing = any(a.label == "gradient_overflow" for a in self.alerts)
        eager = (
            point is not None
            and not (lone and self._benign_streak())
            and (not overflowing or _scheduled(self._point_streak, self.limits))
        )
        moves: dict[str, tuple[str, float]] = {}
        if self._next_level is None or self._last >= self._next_level:
            # levels are looked at every level_every_steps steps (of the run, so the same
            # whatever the checks): the level of a noisy metric comes and goes, and a re-fit
            # for each blip cost a logged step 2.6 ms where a check every 10 steps cost 0.34
            self._next_level = self._last + self.limits.level_every_steps
            moves = {
                m: found
                for m in sorted(self._touched)
                if (
                    found := triggers.bound(m, self._buffers[m], self.config.mismatch)
                    or triggers.level(m, self._buffers[m])
                )
                is not None
            }
            self._touched = set()
            self._streak = self._streak + 1 if moves else 0
            # a move still growing (a climb) re-fits; one that holds still re-fits on its
            # first eager_checks looks and then 2^k (the detectors need points after a jump,
            # not a bigger jump)
            growing = any(size > GROWTH * self._sizes.get(m, 0.0) for m, (_, size) in moves.items())
            eager = eager or (bool(moves) and (growing or _scheduled(self._streak, self.limits)))
        reason = point or next((r for r, _ in moves.values()), None)
        if eager:
            self._sizes = {m: size for m, (_, size) in moves.items()}
        if not eager and self._since_fit < self.limits.periodic_steps:
            return []
        return self._fit(reason or "periodic re-fit", ended=False)

    def close(self) -> list[Alert]:
        """The run has ended: a last re-fit on what is held, with nothing left pending (an
        overflow burst in the first steps is judged even when the run ended inside the loss
        scaler's calibration window)."""
        alerts = self.check()
        if self._last is None:
            return alerts
        return alerts + self._fit("end of run", ended=True)

    def _fit(self, reason: str, *, ended: bool) -> list[Alert]:
        self._since_fit = 0
        self.fits += 1
        rv = self.view()
        found = verdict(rv, self.config)
        alert = self._alert(found, reason, ended=ended, interval=rv.interval)
        if alert is None:
            return []
        self.alerts.append(alert)
        return [alert]

    def view(self) -> RunView:
        """The :class:`~proxydiag.diagnose.view.RunView` of the points held now."""
        mapping = {name: key for key, name in self._names.items()}
        return window_view(
            self._buffers,
            first_step=self._first,
            last_step=self._last,
            precision=self.precision,
            mapping=mapping,
            reads=self.reads,
        )

    def _alert(self, v: Verdict, trigger: str, *, ended: bool, interval: float) -> Alert | None:
        """A new alert for verdict ``v``: a class not alerted yet, a class other than the last
        alert's, or the last alert's class with an onset that moved; None otherwise."""
        if (
            v.label == "healthy"
            or v.onset_step is None
            or self._last is None
            or (not ended and self._held(v, interval))
        ):
            return None
        previous = self.alerts[-1] if self.alerts else None
        seen = any(a.label == v.label for a in self.alerts)
        tol = 2 * max(self.config.taxonomy.order_tolerance_steps, 1)
        if (
            previous is not None
            and previous.label == v.label
            and previous.onset_step is not None
            and abs(previous.onset_step - v.onset_step) <= tol
        ):
            return None
        rollback = (
            self.checkpoints.rollback(v.onset_step, span_steps=self._last - (self._first or 0))
            if self.checkpoints
            else None
        )
        return Alert(
            self.run,
            self.name,
            v.label,
            v.onset_step,
            self._last,
            v.confidence,
            v.summary,
            v.chain[:5],
            v.hints,
            revision=seen,
            trigger=trigger,
            rollback=rollback,
            router_lead_steps=router_lead(v),
        )

    def _held(self, v: Verdict, interval: float) -> bool:
        """True while an overflow burst may still be the loss scaler's calibration."""
        if v.label != "gradient_overflow" or v.onset_step is None or self._first is None:
            return False
        assert self._last is not None
        return calibration_hold(
            onset_step=v.onset_step,
            first_step=self._first,
            last_step=self._last,
            interval=interval,
            scaler=self.config.scaler,
            precision=self.precision,
            logs_scale="loss_scale" in self._buffers,
        )

    def final(self, run: Run) -> Diagnosis:
        """The final answer: offline ``diagnose`` of the whole run, once."""
        return diagnose(run, config=self.config)

    def to_state(self) -> dict[str, Any]:
        """JSON-able state: what a restarted ``watch`` resumes from (see :meth:`from_state`);
        taken after a :meth:`check` (points fed since then are not in it)."""
        return {
            "version": 1,
            "run": self.run,
            "name": self.name,
            "precision": self.precision,
            "names": dict(self._names),
            "totals": dict(self._totals),
            "first": self._first,
            "last": self._last,
            "since_fit": self._since_fit,
            "judged": self._judged,
            "buffers": {k: b.to_state() for k, b in self._buffers.items()},
            "alerts": [a.to_dict() for a in self.alerts],
        }

    @classmethod
    def from_state(
        cls,
        state: Mapping[str, Any],
        *,
        config: DiagnoseConfig | str | Path | None = None,
        aliases: AliasTable | None = None,
        limits: WatchLimits | None = None,
        checkpoints: Checkpoints | None = None,
    ) -> Watcher:
        """A watcher that goes on where the one that wrote ``state`` stopped."""
        w = cls(
            run=state["run"],
            name=state["name"],
            config=config,
            aliases=aliases,
            precision=state.get("precision"),
            limits=limits,
            checkpoints=checkpoints,
        )
        w._names = {str(k): str(v) for k, v in state["names"].items()}
        w._totals = {str(k): float(v) for k, v in state["totals"].items()}
        w._first, w._last = state["first"], state["last"]
        w._since_fit = int(state.get("since_fit", 0))
        w._judged = state.get("judged", state["last"])
        w._buffers = {k: MetricBuffer.from_state(b) for k, b in state["buffers"].items()}
        w.alerts = [alert_from_dict(a) for a in state["alerts"]]
        return w
