"""Tail an MLflow run that is still logging: on a tracking server, or in a file store.

**Server** (``runs:/ID`` with ``MLFLOW_TRACKING_URI`` / ``--tracking-uri``): each poll asks
``runs/get`` for the latest step of every key, and for each key that moved only the new steps
(``metrics/get-history-bulk-interval`` with ``start_step`` after the last one seen, at most
:data:`MAX_STEPS` steps per request, so the server's down-sampling never applies). The run's
status (``RUNNING``, ``FINISHED``, ``FAILED``, ``KILLED``) is kept for ``--until-done``.

**File store** (a run folder ``mlruns/<experiment>/<run>``): each metric file
(``metrics/<key>``, one ``"timestamp value step"`` line per point) is read from the offset
where the last poll stopped, complete lines only, with the offline reader's line parser
(:mod:`proxydiag.ingest.mlflow._metricfiles`); ``meta.yaml`` gives the status.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxydiag.ingest.mlflow import _metricfiles, rest
from proxydiag.ingest.mlflow._meta import OWN_PREFIX, SQL_INF
from proxydiag.ingest.tail.chunk import Rows, vanished
from proxydiag.tracking import AJAX, get_json

#: steps asked per history request (the bulk-interval endpoint returns at most 2,500 points
#: per run, down-sampled above that: ``mlflow/server/handlers.py`` ``MAX_RESULTS_PER_RUN``)
MAX_STEPS = 2500
#: MLflow's run statuses that mean the run will log nothing more
ENDED = frozenset({"FINISHED", "FAILED", "KILLED"})
#: ``meta.yaml`` ``status`` numbers of a file store (``mlflow.entities.RunStatus``)
FILE_STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}


def _value(raw: Any) -> float:
    """A REST value: proto JSON spells NaN/±inf as text (``float`` reads it); SQL stores keep
    ±inf as ±1.7976931348623157e308 (as the offline reader decodes them).

    >>> _value("NaN") != _value("NaN"), _value(1.7976931348623157e308), _value("-Infinity")
    (True, inf, -inf)
    """
    value = float(raw)
    return math.copysign(math.inf, value) if abs(value) == SQL_INF else value


def _merge(rows: dict[int, dict[str, float]]) -> Rows:
    return sorted(rows.items())


@dataclass
class MlflowRunTail:
    """One run on a tracking server."""

    tracking_uri: str
    run_id: str
    seen: dict[str, int] = field(default_factory=dict)
    status: str = "RUNNING"

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def poll(self) -> Rows:
        run = rest.get_run(self.tracking_uri, self.run_id)
        self.status = str(run.get("info", {}).get("status", "RUNNING"))
        rows: dict[int, dict[str, float]] = {}
        for latest in run.get("data", {}).get("metrics", []):
            key, last = str(latest["key"]), int(latest.get("step", 0))
            if key.startswith(OWN_PREFIX):
                continue  # proxydiag's own tags and metrics
            start = self.seen[key] + 1 if key in self.seen else 0  # MLflow's default step
            while start <= last:
                end = min(last, start + MAX_STEPS - 1)
                body = get_json(
                    self.tracking_uri,
                    "metrics/get-history-bulk-interval",
                    {
                        "run_ids": self.run_id,
                        "metric_key": key,
                        "start_step": start,
                        "end_step": end,
                        "max_results": MAX_STEPS,
                    },
                    api=AJAX,
                )
                for point in body.get("metrics", []):
                    rows.setdefault(int(point.get("step", 0)), {})[key] = _value(point["value"])
                start = end + 1
            self.seen[key] = max(last, self.seen.get(key, last))
        return _merge(rows)

    def to_state(self) -> dict[str, Any]:
        return {"seen": dict(self.seen), "status": self.status}

    def restore(self, state: dict[str, Any]) -> None:
        self.seen = {str(k): int(v) for k, v in state.get("seen", {}).items()}
        self.status = str(state.get("status", "RUNNING"))


@dataclass
class MlflowFileTail:
    """One run folder of an MLflow file store."""

    path: Path
    offsets: dict[str, int] = field(default_factory=dict)
    status: str = "RUNNING"
    missing: bool = False

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def poll(self) -> Rows:
        if not (self.path / "metrics").is_dir():
            self.missing = vanished(self.path, self.missing)
            return []
        self.missing = False
        self.status = _file_status(self.path / "meta.yaml")
        rows: dict[int, dict[str, float]] = {}
        for key, file in _metricfiles.metric_files(self.path / "metrics"):
            data = self._appended(key, file)
            if not data:
                continue
            parsed = _metricfiles._parse_fast(data, data.count(b"\n"))
            if parsed is None:
                parsed = _metricfiles._parse_slow(file, data)
            for step, value in zip(
                parsed["step"].to_list(), parsed["value"].to_list(), strict=True
            ):
                rows.setdefault(int(step), {})[key] = float(value)
        return _merge(rows)

    def _appended(self, key: str, file: Path) -> bytes:
        """Complete lines after the offset; a shorter file (rewritten) is read from its start."""
        offset = self.offsets.get(key, 0)
        try:
            size = file.stat().st_size
            if size < offset:
                offset = 0
            with open(file, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except FileNotFoundError:
            return b""
        data = data[: data.rfind(b"\n") + 1]
        self.offsets[key] = offset + len(data)
        return data

    def to_state(self) -> dict[str, Any]:
        return {"offsets": dict(self.offsets), "status": self.status}

    def restore(self, state: dict[str, Any]) -> None:
        self.offsets = {str(k): int(v) for k, v in state.get("offsets", {}).items()}
        self.status = str(state.get("status", "RUNNING"))


def _file_status(meta: Path) -> str:
    """The ``status`` of a file-store run's ``meta.yaml`` (RUNNING when unreadable)."""
    try:
        for line in meta.read_text(encoding="utf-8").splitlines():
            if line.startswith("status:"):
                return FILE_STATUS.get(int(line.split(":", 1)[1].strip()), "RUNNING")
    except (OSError, ValueError):
        pass
    return "RUNNING"
