"""``proxydiag watch SOURCE...``: the live guard (tail growing sources) and ``--replay``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from proxydiag.cli._app import app, err, json_line, out
from proxydiag.cli._options import (
    DEFAULT_STORE,
    AliasesOpt,
    CheckpointsOpt,
    ConfigOpt,
    EveryOpt,
    FailOnOpt,
    IdleTimeoutOpt,
    IntervalOpt,
    LineFormat,
    LineFormatOpt,
    LogToMlflowOpt,
    MarginOpt,
    MlflowExperimentOpt,
    NotifyCooldownOpt,
    NotifyMaxOpt,
    NotifyMinOpt,
    NotifyOpt,
    OnAlertOpt,
    PrecisionOpt,
    ReplayOpt,
    StartTimeoutOpt,
    StoreOpt,
    Tier,
    TrackingOpt,
    UntilDoneOpt,
)
from proxydiag.errors import ConfigError

Sources = Annotated[
    list[str] | None,
    typer.Argument(
        help="TensorBoard logdirs, JSONL/CSV/console log files, MLflow run folders, runs:/ID"
    ),
]


@app.command()
def watch(
    sources: Sources = None,
    interval: IntervalOpt = 10.0,
    until_done: UntilDoneOpt = False,
    idle_timeout: IdleTimeoutOpt = 600.0,
    start_timeout: StartTimeoutOpt = 3600.0,
    fmt: LineFormatOpt = LineFormat.text,
    on_alert: OnAlertOpt = None,
    notify: NotifyOpt = None,
    notify_min: NotifyMinOpt = Tier.warning,
    notify_cooldown: NotifyCooldownOpt = 600.0,
    notify_max: NotifyMaxOpt = 20,
    fail_on: FailOnOpt = None,
    replay: ReplayOpt = False,
    every: EveryOpt = 1,
    checkpoints: CheckpointsOpt = None,
    margin_steps: MarginOpt = 100,
    precision: PrecisionOpt = None,
    log_to_mlflow: LogToMlflowOpt = False,
    mlflow_experiment: MlflowExperimentOpt = None,
    tracking_uri: TrackingOpt = None,
    config: ConfigOpt = None,
    aliases: AliasesOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Diagnose runs while they train: alert on the first signs of a failure class.

    --mlflow-experiment NAME watches every running run of that experiment, new ones too;
    --log-to-mlflow tags a watched MLflow run with proxydiag.alert / .label / .onset_step.
    --precision is the run's precision when the source does not say; --every is, with
    --replay, the logged steps fed per check.
    """
    from proxydiag.metrics import AliasTable
    from proxydiag.pipeline import Settings
    from proxydiag.watch.live import Session

    failing = _classes(fail_on)
    cfg = Settings.load(config).diagnose
    table = AliasTable.load(aliases) if aliases is not None else AliasTable.default()
    ckpt = _checkpoints(checkpoints, margin_steps)
    sources = list(sources or [])
    if not sources and not (mlflow_experiment and not replay):
        raise ConfigError("watch: give a SOURCE (or --mlflow-experiment NAME)")
    if replay:
        matched = _replay(
            sources, every=every, cfg=cfg, table=table, ckpt=ckpt, fmt=fmt, failing=failing
        )
    else:
        session = Session(
            sources,
            config=cfg,
            aliases=table,
            state_dir=store / "watch",
            checkpoints=ckpt,
            precision=str(precision) if precision is not None else None,
            experiment=mlflow_experiment,
            tracking_uri=tracking_uri,
        )
        from proxydiag.watch.notify import notifier

        act = _Actions(
            fmt=fmt,
            on_alert=on_alert,
            failing=failing,
            mlflow_uri=tracking_uri if log_to_mlflow else None,
            mlflow=log_to_mlflow,
            notifier=notifier(
                notify or [],
                min_tier=str(notify_min),
                cooldown_s=notify_cooldown,
                max_per_run=notify_max,
            ),
        )
        matched = _live(
            session,
            act,
            interval_s=interval,
            until_done=until_done,
            idle_timeout_s=idle_timeout,
            start_timeout_s=start_timeout,
            ckpt=ckpt,
        )
    if matched:
        raise typer.Exit(1)


def _replay(
    sources: list[str], *, every: int, cfg: Any, table: Any, ckpt: Any, fmt: str, failing: set[str]
) -> bool:
    from proxydiag.ingest import read_runs
    from proxydiag.watch.replay import replay

    matched = False
    for source in sources:
        for run in read_runs(source, aliases=table):
            result = replay(run, every=every, config=cfg, aliases=table, checkpoints=ckpt)
            for alert in result.alerts:
                _emit(alert.to_dict(), fmt)
                matched = matched or alert.label in failing
            d = result.final
            _emit(_final(run.id, run.name, d, source, ckpt), fmt)
            matched = matched or d.label in failing
    return matched


@dataclass
class _Actions:
    """What to do with each alert of a live watch."""

    fmt: str
    on_alert: str | None
    failing: set[str]
    mlflow_uri: str | None
    mlflow: bool
    notifier: Any = None
    matched: bool = False

    def __call__(self, alert: Any, source: str) -> None:
        from proxydiag.watch.live import run_hook, tag_mlflow

        _emit(alert.to_dict(), self.fmt)
        self.matched = self.matched or alert.label in self.failing
        if self.on_alert:
            run_hook(self.on_alert, alert)
        if self.mlflow:
            tag_mlflow(source, alert, tracking_uri=self.mlflow_uri)
        if self.notifier is not None:
            self.notifier.submit(alert)

    def close(self) -> None:
        """Deliver what is still queued for the webhooks (bounded wait)."""
        if self.notifier is not None:
            self.notifier.close()


def _live(
    session: Any,
    act: _Actions,
    *,
    interval_s: float,
    until_done: bool,
    idle_timeout_s: float,
    start_timeout_s: float,
    ckpt: Any,
) -> bool:
    if interval_s <= 0 or idle_timeout_s <= 0 or start_timeout_s <= 0:
        raise ConfigError("--interval, --idle-timeout and --start-timeout must be positive seconds")
    try:
        matched = _loop(
            session, act, interval_s, until_done, (idle_timeout_s, start_timeout_s), ckpt
        )
    finally:
        act.close()
    silent = session.never_started() if until_done else []
    if silent:
        raise ConfigError(
            f"{silent[0]}: no data within --start-timeout {start_timeout_s:g} s"
            + (f" (and {len(silent) - 1} more)" if len(silent) > 1 else "")
        )
    return matched


def _loop(
    session: Any,
    act: _Actions,
    interval_s: float,
    until_done: bool,
    timeouts: tuple[float, float],
    ckpt: Any,
) -> bool:
    try:
        while True:
            for alert in session.tick():
                act(alert, alert.run)
            session.save()
            if until_done and session.done(*timeouts):
                break
            time.sleep(interval_s)
    except KeyboardInterrupt:
        session.save()
        err.print("stopped; `proxydiag watch` with the same sources resumes here", markup=False)
        return act.matched
    for alert in session.close():
        act(alert, alert.run)
    for watched, d in session.finish():
        if d is not None:
            _emit(
                _final(watched.watcher.run, watched.watcher.name, d, watched.source, ckpt), act.fmt
            )
            act.matched = act.matched or d.label in act.failing
    session.save()
    return act.matched


def _final(run: str, name: str, d: Any, source: str, ckpt: Any = None) -> dict[str, Any]:
    """The final object; with checkpoints, where to go back to after the offline onset."""
    span = (d.last_step or 0) - (d.first_step or 0)
    back = (
        ckpt.rollback(d.onset_step, span_steps=span)
        if ckpt is not None and d.onset_step is not None
        else None
    )
    return {
        "final": True,
        "run": run,
        "name": name,
        "label": d.label,
        "onset_step": d.onset_step,
        "confidence": round(float(d.confidence), 4),
        "source": source,
        "summary": d.summary,
        "rollback": back.to_dict() if back is not None else None,
    }


def _emit(obj: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        json_line(json.dumps(obj), flush=True)
        return
    back = obj.get("rollback")
    where = (
        (
            f"; go back to step {back['checkpoint_step']} and skip steps "
            f"{back['skip_from_step']}-{back['skip_to_step']}"
        )
        if back
        else ""
    )
    if obj["final"]:
        out.print(f"final   {obj['name']}: {obj['summary']}{where}", markup=False)
        return
    kind = "revised" if obj["revision"] else "ALERT  "
    out.print(
        f"{kind} {obj['name']}: {obj['class']} from step {obj['onset_step']} (raised at "
        f"step {obj['raised_at_step']}, confidence {obj['confidence']:.2f}){where}. "
        f"{obj['summary']}",
        markup=False,
    )


def _classes(text: str | None) -> set[str]:
    from proxydiag.diagnose.result import LABELS

    found = {c.strip() for c in (text or "").split(",") if c.strip()}
    bad = sorted(found - set(LABELS[1:]))
    if bad:
        raise ConfigError(f"--fail-on {bad[0]!r}: use {', '.join(LABELS[1:])}")
    return found


def _checkpoints(text: str | None, margin_steps: int) -> Any:
    from proxydiag.watch.checkpoints import Checkpoints

    if text is None:
        return None
    # a folder (read again at every alert; it may not exist yet) or steps "100,200"
    return Checkpoints.parse(text, margin_steps=margin_steps)
