"""``proxydiag watch SOURCE...``: the live guard (tail growing sources) and ``--replay``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
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
IdleTimeout = Annotated[float, _opt("--idle-timeout", "seconds without new data: done")]
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
    fmt: Fmt = "text",
    on_alert: OnAlert = None,
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
    from proxydiag.diagnose.config import DiagnoseConfig, load_config
    from proxydiag.metrics import AliasTable
    from proxydiag.watch.live import Session

    if fmt not in TEXT_JSON:
        raise ConfigError(f"--format {fmt!r}: use text or json")
    failing = _classes(fail_on)
    cfg = load_config(config) if config is not None else DiagnoseConfig()
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
        act = _Actions(
            fmt=fmt,
            on_alert=on_alert,
            failing=failing,
            mlflow_uri=tracking_uri if log_to_mlflow else None,
            mlflow=log_to_mlflow,
        )
        matched = _live(
            session,
            act,
            interval_s=interval,
            until_done=until_done,
            idle_timeout_s=idle_timeout,
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
    matched: bool = False

    def __call__(self, alert: Any, source: str) -> None:
        from proxydiag.watch.live import run_hook, tag_mlflow

        _emit(alert.to_dict(), self.fmt)
        self.matched = self.matched or alert.label in self.failing
        if self.on_alert:
            run_hook(self.on_alert, alert)
        if self.mlflow:
            tag_mlflow(source, alert, tracking_uri=self.mlflow_uri)


def _live(
    session: Any,
    act: _Actions,
    *,
    interval_s: float,
    until_done: bool,
    idle_timeout_s: float,
    ckpt: Any,
) -> bool:
    if interval_s <= 0 or idle_timeout_s <= 0:
        raise ConfigError("--interval and --idle-timeout must be positive seconds")
    try:
        while True:
            for alert in session.tick():
                act(alert, alert.run)
            session.save()
            if until_done and session.done(idle_timeout_s):
                break
            time.sleep(interval_s)
    except KeyboardInterrupt:
        session.save()
        err.print("stopped; `proxydiag watch` with the same sources resumes here", markup=False)
        return act.matched
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
    back = ckpt.rollback(d.onset_step) if ckpt is not None and d.onset_step is not None else None
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
    if Path(text).is_dir():
        return Checkpoints.scan(text, margin_steps=margin_steps)
    return Checkpoints.parse(text, margin_steps=margin_steps)
