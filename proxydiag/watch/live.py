"""``proxydiag watch SOURCE...``: tail growing sources, feed their watchers, act on alerts.

One :class:`Watched` per source: its tail (:mod:`proxydiag.ingest.tail`) and its
:class:`~proxydiag.watch.watcher.Watcher`. :meth:`Session.tick` polls every tail once (reading
only what was appended) and returns the new alerts; :meth:`Session.save` writes each source's
offsets and watcher state to ``STATE_DIR/<source>.json`` so a restarted watch resumes there;
:meth:`Session.finish` is the final offline diagnosis of each source, read once whole.

``--on-alert CMD`` runs ``CMD`` (split like a shell would, but never run by one: run names and
metric keys are untrusted text and only reach the command as environment variables and as
the alert's JSON on stdin).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.result import Diagnosis
from proxydiag.errors import ConfigError, IngestWarning, ProxydiagError
from proxydiag.ingest import ReadContext, read_run
from proxydiag.ingest.tail import Tail, open_tail
from proxydiag.metrics import AliasTable
from proxydiag.run import slug
from proxydiag.watch.alerts import Alert
from proxydiag.watch.checkpoints import Checkpoints
from proxydiag.watch.names import distinct
from proxydiag.watch.watcher import Watcher

#: seconds an ``--on-alert`` command may run
HOOK_TIMEOUT_S = 60.0


@dataclass
class Watched:
    """One source being watched."""

    source: str
    tail: Tail
    watcher: Watcher
    #: monotonic time of the last poll that found data (of the watch's start before any)
    last_data: float
    #: whether any data came yet (the idle timer starts with it)
    started: bool = False


class Session:
    """Every source of one ``proxydiag watch`` (see the module docstring)."""

    def __init__(
        self,
        sources: list[str],
        *,
        config: DiagnoseConfig,
        aliases: AliasTable,
        state_dir: Path | None,
        checkpoints: Checkpoints | None = None,
        precision: str | None = None,
        experiment: str | None = None,
        tracking_uri: str | None = None,
    ) -> None:
        self.config, self.aliases, self.state_dir = config, aliases, state_dir
        self.checkpoints, self.precision = checkpoints, precision
        self.experiment, self.tracking_uri = experiment, tracking_uri
        self.watched: list[Watched] = []
        self.began = time.monotonic()
        for source in sources:
            self._add(source)

    def _add(self, source: str) -> None:
        tail = open_tail(source, ReadContext(aliases=self.aliases))
        taken = [w.watcher.name for w in self.watched]
        watcher = Watcher(
            run=source,
            name=distinct([source], taken)[source],
            config=self.config,
            aliases=self.aliases,
            precision=self.precision,
            checkpoints=self.checkpoints,
        )
        saved = self._load(source)
        if saved is not None:
            tail.restore(saved["tail"])
            watcher = Watcher.from_state(
                saved["watcher"],
                config=self.config,
                aliases=self.aliases,
                checkpoints=self.checkpoints,
            )
        self.watched.append(Watched(source, tail, watcher, time.monotonic()))

    def discover(self) -> None:
        """With an MLflow experiment: start watching its runs that are running now."""
        if self.experiment is None:
            return
        from proxydiag.ingest.mlflow.files import running_run_dirs
        from proxydiag.ingest.mlflow.uri import file_store, search_ids
        from proxydiag.tracking import resolve_tracking_uri

        uri = resolve_tracking_uri(self.tracking_uri)
        known = {w.source for w in self.watched}
        folder = file_store(uri)
        if folder is not None:  # read the store's folders: no client, no server
            for run_dir in running_run_dirs(folder, self.experiment):
                if str(run_dir) not in known:
                    self._add(str(run_dir))
            return
        for run_id in search_ids(self.experiment, "attributes.status = 'RUNNING'", uri):
            if f"runs:/{run_id}" not in known:
                self._add(f"runs:/{run_id}")

    def tick(self) -> list[Alert]:
        """Poll every source once; the alerts new since the last tick."""
        self.discover()
        alerts: list[Alert] = []
        for w in self.watched:
            try:
                rows = w.tail.poll()
            except ProxydiagError as exc:  # a damaged chunk: the next tick tries again
                warnings.warn(IngestWarning(str(exc)), stacklevel=2)
                continue
            if rows:
                w.last_data, w.started = time.monotonic(), True
            for step, metrics in rows:
                w.watcher.add(step, metrics)
            alerts.extend(w.watcher.check())
        return alerts

    def done(self, timeout_s: float, start_timeout_s: float | None = None) -> bool:
        """True when every source's run has ended (MLflow status FINISHED, FAILED or KILLED)
        or got no data for ``timeout_s`` seconds since its last data; a source with no data
        yet waits ``start_timeout_s`` (default: ``timeout_s``) from the watch's start, and an
        experiment with no running run yet waits that long for one."""
        now = time.monotonic()
        start = timeout_s if start_timeout_s is None else start_timeout_s
        if not self.watched:
            return now - self.began >= start
        return all(
            bool(getattr(w.tail, "ended", False))
            or (now - w.last_data >= timeout_s if w.started else now - self.began >= start)
            for w in self.watched
        )

    def never_started(self) -> list[str]:
        """What gave no data at all: the sources, or the experiment when no run started."""
        if not self.watched and self.experiment is not None:
            return [f"MLflow experiment {self.experiment!r} (no running run)"]
        return [w.source for w in self.watched if not w.started]

    def close(self) -> list[Alert]:
        """The runs have ended: each watcher's last re-fit on what it holds (an overflow burst
        at the very end is judged, the calibration hold lifted); the alerts it raises."""
        return [a for w in self.watched for a in w.watcher.close()]

    def finish(self) -> list[tuple[Watched, Diagnosis | None]]:
        """Each source read whole once and diagnosed offline (None when it cannot be read)."""
        out: list[tuple[Watched, Diagnosis | None]] = []
        for w in self.watched:
            if w.watcher.last_step is None:
                out.append((w, None))  # never gave data: said once, by the caller
                continue
            try:
                run = read_run(w.source, aliases=self.aliases)
            except ProxydiagError as exc:
                warnings.warn(
                    IngestWarning(f"{w.source}: no final diagnosis ({exc})"), stacklevel=2
                )
                out.append((w, None))
                continue
            out.append((w, w.watcher.final(run)))
        return out

    def save(self) -> None:
        """Write each source's offsets and watcher state (atomically)."""
        if self.state_dir is None:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for w in self.watched:
            path = self._path(w.source)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(
                json.dumps(
                    {"source": w.source, "tail": w.tail.to_state(), "watcher": w.watcher.to_state()}
                )
            )
            os.replace(tmp, path)

    def _path(self, source: str) -> Path:
        assert self.state_dir is not None
        return self.state_dir / f"{slug(os.path.abspath(source))}.json"

    def _load(self, source: str) -> dict[str, dict[str, object]] | None:
        if self.state_dir is None or not self._path(source).is_file():
            return None
        try:
            data = json.loads(self._path(source).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{self._path(source)}: unreadable watch state ({exc}); delete it to start over"
            ) from None
        return data if isinstance(data, dict) else None


def alert_env(alert: Alert) -> dict[str, str]:
    """The environment variables an ``--on-alert`` command gets.

    >>> alert_env(Alert("r", "n", "loss_divergence", 5, 9, 0.8))["PROXYDIAG_CLASS"]
    'loss_divergence'
    """
    return {
        "PROXYDIAG_RUN": alert.run,
        "PROXYDIAG_NAME": alert.name,
        "PROXYDIAG_CLASS": alert.label,
        "PROXYDIAG_ONSET_STEP": "" if alert.onset_step is None else str(alert.onset_step),
        "PROXYDIAG_RAISED_AT_STEP": str(alert.raised_at_step),
        "PROXYDIAG_CONFIDENCE": f"{alert.confidence:.4f}",
        "PROXYDIAG_CHECKPOINT": (alert.rollback.checkpoint or str(alert.rollback.checkpoint_step))
        if alert.rollback
        else "",
    }


def run_hook(command: str, alert: Alert) -> None:
    """Run ``--on-alert`` for one alert: argv from ``shlex.split``, no shell, JSON on stdin."""
    argv = shlex.split(command)
    if not argv:
        raise ConfigError("--on-alert: empty command")
    try:
        done = subprocess.run(
            argv,
            input=json.dumps(alert.to_dict()),
            text=True,
            check=False,
            env={**os.environ, **alert_env(alert)},
            timeout=HOOK_TIMEOUT_S,
            capture_output=True,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        warnings.warn(IngestWarning(f"--on-alert {argv[0]}: {exc}"), stacklevel=2)
        return
    if done.returncode:
        warnings.warn(IngestWarning(f"--on-alert {argv[0]} exited {done.returncode}"), stacklevel=2)


def tag_mlflow(source: str, alert: Alert, *, tracking_uri: str | None = None) -> None:
    """Set ``proxydiag.alert``, ``proxydiag.label`` and ``proxydiag.onset_step`` on the MLflow
    run being watched (``runs:/ID``, or a file-store run folder), so its UI shows the alert
    live. Other sources have no MLflow run: nothing is done."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from proxydiag.tracking import resolve_tracking_uri

    if source.startswith("runs:/"):
        uri, run_id = resolve_tracking_uri(tracking_uri), source[len("runs:/") :].strip("/")
    elif (Path(source) / "meta.yaml").is_file():
        folder = Path(source).resolve()
        uri, run_id = folder.parent.parent.as_uri(), folder.name
    else:
        return
    tags = {
        "proxydiag.alert": alert.summary or alert.label,
        "proxydiag.label": alert.label,
        "proxydiag.onset_step": "" if alert.onset_step is None else str(alert.onset_step),
    }
    try:
        client = MlflowClient(uri)
        for key, value in tags.items():
            client.set_tag(run_id, key, value[:5000])
    except MlflowException as exc:
        warnings.warn(
            IngestWarning(f"--log-to-mlflow {source}: {str(exc).splitlines()[0]}"), stacklevel=2
        )
