"""W&B offline/local run directories (``wandb/run-*/run-*.wandb``, ``offline-run-*``).

The ``.wandb`` file is W&B's transaction log: a LevelDB-style log of ``Record`` protos. It is
read with the wandb package's own reader (``wandb.sdk.internal.datastore.DataStore`` and
``wandb.proto.wandb_internal_pb2.Record``; the optional extra ``proxydiag[wandb]``; wandb
0.30 dropped the Python DataStore, hence the pin below 0.30). History records give the points:
``_step`` is the step, ``_timestamp`` the wall time, every other numeric item a metric (values
are JSON; ``NaN``, ``Infinity`` and ``-Infinity`` are kept; media and strings are skipped).
Config goes to ``attrs["params"]`` (and ``role``/``group``/``seed``/``experts_kept``/...
when the config names them), the final summary to ``attrs["summary"]``. A damaged record
ends the read there with an :class:`~proxydiag.errors.IngestWarning` naming ``file@offset``.

Detection needs no wandb: a ``.wandb`` file starts with ``:W&B``. W&B's ``latest-run`` symlink
is skipped when a folder is walked (:func:`proxydiag.ingest.discover` skips linked folders), and
read when it is named.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from proxydiag.errors import IngestError, IngestWarning, MissingExtraError
from proxydiag.events import Event
from proxydiag.frame import raw
from proxydiag.ingest import ReadContext, is_uri
from proxydiag.ingest.contract import source_run
from proxydiag.run import Run

NAME = "wandb"
MAGIC = b":W&B"
_SPECIAL = {"_step", "_timestamp", "_runtime"}
_META = ("role", "group", "seed", "experts_kept", "experts_total", "cost_per_step", "precision")


def _log_file(path: Path) -> Path | None:
    if path.is_file():
        return path if path.suffix == ".wandb" and _magic_ok(path) else None
    if not path.is_dir() or "run-" not in path.name:
        return None
    files = sorted(path.glob("run-*.wandb"))
    return files[0] if files and _magic_ok(files[0]) else None


def _magic_ok(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == MAGIC
    except OSError:
        return False


def can_read(source: str | Path) -> bool:
    """A W&B run directory (``run-*``/``offline-run-*`` holding ``run-*.wandb``) or the file."""
    if is_uri(source):
        return False
    return _log_file(Path(source)) is not None


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    """The run in a W&B run directory or ``.wandb`` file."""
    path = Path(source)
    log = _log_file(path)
    if log is None:
        raise IngestError(f"{path}: no run-*.wandb file; point at a wandb/run-* directory")
    try:
        from wandb.proto import wandb_internal_pb2
        from wandb.sdk.internal.datastore import DataStore
    except ImportError as exc:
        raise MissingExtraError("wandb<0.30 (with its DataStore)", "wandb") from exc
    history = _History()
    state: dict[str, Any] = {"params": {}, "summary": {}, "run": {}}
    events: list[Event] = []
    store = DataStore()
    try:
        try:
            store.open_for_scan(str(log))  # type: ignore[no-untyped-call]
        except Exception as exc:  # wandb raises a bare Exception (or asserts) on a bad header
            raise IngestError(f"{log}@0: not a readable W&B transaction log ({exc})") from exc
        while True:
            offset = store._index
            try:
                data = store.scan_data()  # type: ignore[no-untyped-call]
            except (AssertionError, ValueError, OSError) as exc:
                message = f"{log}@{offset}: damaged record ({exc}); read up to here"
                warnings.warn(IngestWarning(message), stacklevel=2)
                events.append(Event("truncated", None, None, None, "warning", 1.0, message))
                break
            if data is None:
                break
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
            record.ParseFromString(data)
            _apply(record, history, state)
    finally:  # DataStore has no close(): its file would stay open until collected
        handle = getattr(store, "_fp", None)
        if handle is not None:
            handle.close()
    return [_build(path, log, history, state, events, ctx)]


class _History:
    """History items as columns (one Python step per logged item; W&B histories are small)."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.keys: list[str] = []
        self.values: list[float] = []
        self.walls: list[float | None] = []

    def add(self, record: Any) -> None:
        items = {_key(item): item.value_json for item in record.history.item}
        step = _number(items.get("_step", ""))
        step_i = (
            int(step) if step is not None and math.isfinite(step) else int(record.history.step.num)
        )
        wall = _number(items.get("_timestamp", ""))
        for key, text in items.items():
            if key in _SPECIAL or key.startswith("_wandb"):
                continue
            value = _number(text)
            if value is not None:
                self.steps.append(step_i)
                self.keys.append(key)
                self.values.append(value)
                self.walls.append(wall)


def _key(item: Any) -> str:
    return str(item.key) if item.key else ".".join(item.nested_key)


def _number(text: str) -> float | None:
    """A JSON number (``NaN``/``Infinity`` included); None for anything else."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _apply(record: Any, history: _History, state: dict[str, Any]) -> None:
    kind = record.WhichOneof("record_type")
    if kind == "history":
        history.add(record)
    elif kind == "run":
        run = record.run
        state["run"] = {
            "wandb_run_id": run.run_id,
            "project": run.project,
            "entity": run.entity,
            "display_name": run.display_name,
            "wandb_group": run.run_group,
            "job_type": run.job_type,
            "wandb_tags": list(run.tags),
            "wandb_notes": run.notes,
        }
        for item in run.config.update:
            state["params"][_key(item)] = _json(item.value_json)
    elif kind in ("config", "summary"):
        target = state["params" if kind == "config" else "summary"]
        body = getattr(record, kind)
        for item in body.update:
            target[_key(item)] = _json(item.value_json)
        for item in body.remove:
            target.pop(_key(item), None)


def _build(
    path: Path,
    log: Path,
    history: _History,
    state: dict[str, Any],
    events: list[Event],
    ctx: ReadContext,
) -> Run:
    params = {k: v for k, v in state["params"].items() if not k.startswith("_wandb")}
    summary = {k: v for k, v in state["summary"].items() if not k.startswith("_")}
    info = {k: v for k, v in state["run"].items() if v not in ("", [], None)}
    attrs: dict[str, Any] = {"params": params, "summary": summary, **info}
    attrs.update({k: params[k] for k in _META if k in params})
    name = str(
        info.get("display_name") or info.get("wandb_run_id") or log.stem.removeprefix("run-")
    )
    if not history.values:
        message = f"{log}: no numeric history in this W&B run"
        warnings.warn(IngestWarning(message), stacklevel=3)
    frame = raw(history.steps, history.keys, history.values, history.walls)
    return source_run(
        frame, path, ctx, fmt=NAME, name=name, attrs=attrs, sidecar_of=log.parent, events=events
    )
