"""``proxydiag watch SOURCE...``: the live guard (tail growing sources) and ``--replay``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from proxydiag.cli._app import (
    DEFAULT_STORE,
    AliasesOpt,
    ConfigOpt,
    StoreOpt,
    TrackingOpt,
    app,
    err,
    out,
)
from proxydiag.errors import ConfigError

TEXT_JSON = ("text", "json")


def _opt(name: str, help_text: str) -> Any:
    return typer.Option(name, help=help_text)


Sources = Annotated[
    list[str] | None,
    typer.Argument(
        help="TensorBoard logdirs, JSONL/CSV/console log files, MLflow run folders, runs:/ID"
    ),
]
Interval = Annotated[float, _opt("--interval", "seconds between polls")]
UntilDone = Annotated[
    bool,
    _opt(
        "--until-done",
        "stop when every run has finished or is idle "
        "for --idle-timeout, then print the final diagnoses",
    ),
]
IdleTimeout = Annotated[
    float, _opt("--idle-timeout", "seconds without new data, counted from a source's first data")
]
StartTimeout = Annotated[
    float,
    _opt(
        "--start-timeout",
        "with --until-done: seconds to wait for a source's first data (or an experiment's "
        "first running run); then exit 2 naming it",
    ),
]
Fmt = Annotated[str, typer.Option("--format", "-f", help="text | json (JSON Lines)")]
OnAlert = Annotated[
    str | None,
    _opt(
        "--on-alert",
        "command run per alert, the alert in PROXYDIAG_* variables and as JSON on stdin (no shell)",
    ),
]
FailOn = Annotated[
    str | None, _opt("--fail-on", "exit 1 when an alert or final label is one of CLASS[,CLASS]")
]
Replay = Annotated[bool, _opt("--replay", "feed finished runs as if live")]
Every = Annotated[int, _opt("--every", "with --replay: logged steps per check")]
Ckpts = Annotated[
    str | None,
    _opt(
        "--checkpoints",
        "checkpoint steps 100,200,... or a folder of checkpoint-N / iter_N / global_stepN",
    ),
]
Margin = Annotated[int, _opt("--margin-steps", "go back at least this many steps before the onset")]
Precision = Annotated[
    str | None, _opt("--precision", "fp16 | bf16 | fp32 when the source does not say")
]
Notify = Annotated[
    list[str] | None,
    typer.Option(
        "--notify",
        metavar="URL",
        help="POST each alert's JSON, with a one-line `text` chat webhooks show, to URL "
        "(repeatable)",
    ),
]
NotifyMin = Annotated[str, _opt("--notify-min", "warning | critical: the lowest tier sent")]
NotifyCooldown = Annotated[
    float, _opt("--notify-cooldown", "seconds between two notifications of one run and class")
]
NotifyMax = Annotated[int, _opt("--notify-max", "notifications per run at most")]
LogMlflow = Annotated[
    bool,
    _opt(
        "--log-to-mlflow", "tag the watched MLflow run with proxydiag.alert / .label / .onset_step"
    ),
]
Experiment = Annotated[
    str | None,
    _opt("--mlflow-experiment", "watch every running run of this MLflow experiment, new ones too"),
]


@app.command()
def watch(
    sources: Sources = None,
    interval: Interval = 10.0,
    until_done: UntilDone = False,
    idle_timeout: IdleTimeout = 600.0,
    start_timeout: StartTimeout = 3600.0,
    fmt: Fmt = "text",
    on_alert: OnAlert = None,
    notify: Notify = None,
    notify_min: NotifyMin = "warning",
    notify_cooldown: NotifyCooldown = 600.0,
    notify_max: NotifyMax = 20,
    fail_on: FailOn = None,
    replay: Replay = False,
    every: Every = 1,
    checkpoints: Ckpts = None,
    margin_steps: Margin = 100,
    precision: Precision = None,
    log_to_mlflow: LogMlflow = False,
    mlflow_experiment: Experiment = None,
    tracking_uri: TrackingOpt = None,
    config: ConfigOpt = None,
    aliases: AliasesOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Diagnose runs while they train: alert on the first signs of a failure class."""
    from proxydiag.metrics import AliasTable
    from proxydiag.pipeline import Settings
    from proxydiag.watch.live import Session

    if fmt not in TEXT_JSON:
        raise ConfigError(f"--format {fmt!r}: use text or json")
    failing = _classes(fail_on)
    precision = _precision(precision)
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
            precision=precision,
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
                min_tier=notify_min,
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
        out.print(json.dumps(obj), markup=False, soft_wrap=True, highlight=False)
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


#: precisions ``--precision`` takes (as runs and sidecars spell them)
PRECISIONS = ("fp16", "bf16", "fp32", "fp8", "tf32")


def _precision(text: str | None) -> str | None:
    if text is None:
        return None
    value = text.strip().lower()
    if value not in PRECISIONS:
        raise ConfigError(f"--precision {text!r}: use {', '.join(PRECISIONS)}")
    return value


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
