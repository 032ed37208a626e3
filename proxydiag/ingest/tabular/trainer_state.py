"""Hugging Face Trainer's ``trainer_state.json``: the ``log_history`` list of logged dicts.

Training entries carry ``loss``, ``grad_norm``, ``learning_rate``, ``epoch``; evaluation entries
``eval_*``; the last entry summarises the run (``train_runtime``, ``train_loss``, ...) and goes
into ``attrs["summary"]`` rather than the frame. The file is written by Python's ``json``, so
NaN and ±inf appear as ``NaN``/``Infinity`` tokens; a ``null`` there is a value that was not
logged and is no row.

HF's ``logging_nan_inf_filter`` (default on) replaces a NaN/inf step loss by the running
average before logging, so ``loss`` can hide non-finite steps: the run's notes say so, and
``grad_norm`` (not filtered) is the metric to trust for non-finite values.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from proxydiag.errors import IngestError
from proxydiag.ingest import ReadContext
from proxydiag.ingest.tabular import tables
from proxydiag.metrics import AliasTable
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.run.sidecar import sidecar_for

NAME = "trainer_state"
FORMAT = "hf_trainer_state"
FILENAME = "trainer_state.json"
#: keys the trainer callback logs itself (its alerts), never training metrics
OWN_PREFIX = "proxydiag/"
_SUMMARY_KEYS = frozenset(
    {
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "total_flos",
        "train_loss",
    }
)
_STATE_ATTRS = {
    "logging_steps": "log_interval",
    "global_step": "global_step",
    "max_steps": "max_steps",
    "train_batch_size": "train_batch_size",
    "num_train_epochs": "num_train_epochs",
    "eval_steps": "eval_steps",
}
NAN_FILTER_NOTE = (
    "HF Trainer's logging_nan_inf_filter (default True) replaces a NaN/inf step loss by the "
    "running average: 'loss' may hide non-finite steps; check grad_norm"
)


def can_read(source: str | Path) -> bool:
    """A file named ``trainer_state.json``, or a ``.json`` whose start mentions log_history."""
    path = Path(source)
    if not path.is_file():
        return False
    if path.name == FILENAME:
        return True
    if path.suffix.lower() != ".json":
        return False
    try:
        with path.open("rb") as fh:
            return b'"log_history"' in fh.read(1 << 16)
    except OSError:
        return False


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    path = Path(source)
    state = _load(path)
    history = state.get("log_history")
    if not isinstance(history, list) or not all(isinstance(e, dict) for e in history):
        raise IngestError(f"{path}: 'log_history' is missing or not a list of objects")
    attrs: dict[str, Any] = {
        target: state[key] for key, target in _STATE_ATTRS.items() if state.get(key) is not None
    }
    run = history_run(
        history,
        name=_run_name(path),
        source=path,
        aliases=ctx.aliases,
        attrs=attrs,
        sidecar=sidecar_for(path),
    )
    return [run]


def history_run(
    history: list[dict[str, Any]],
    *,
    name: str,
    source: str | Path,
    aliases: AliasTable | None = None,
    attrs: dict[str, Any] | None = None,
    sidecar: Path | None = None,
) -> Run:
    """A :class:`~proxydiag.run.Run` of a Trainer's ``log_history``: the one conversion, used
    by this reader and by the trainer callback's final diagnosis (so the callback and a later
    read of the run's ``trainer_state.json`` see the same frame). The summary entry goes into
    ``attrs["summary"]``; entries the callback added (``proxydiag/...`` keys: its alerts) and
    values that are not numbers (a dict, a list) are no points."""
    summary = [e for e in history if _SUMMARY_KEYS & set(e) and not {"loss", "eval_loss"} & set(e)]
    entries = [
        {k: v for k, v in e.items() if not str(k).startswith(OWN_PREFIX)}
        for e in history
        if e not in summary
    ]
    entries = [e for e in entries if set(e) - {"step", "epoch"}]
    run_attrs: dict[str, Any] = dict(attrs or {})
    run_attrs.update(
        {"framework": "hf_trainer", "step_kind": "optimizer", "notes": [NAN_FILTER_NOTE]}
    )
    if summary:
        run_attrs["summary"] = summary[-1]
    return build_run(
        _raw(source, entries),
        name=name,
        source=source,
        fmt=FORMAT,
        aliases=aliases,
        attrs=run_attrs,
        sidecar=sidecar,
    )


def _load(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_bytes())
    except OSError as exc:
        raise IngestError(f"{path}: cannot read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path}: not UTF-8 JSON; is it a trainer_state.json?") from exc
    except json.JSONDecodeError as exc:
        raise IngestError(
            f"{path}:{exc.lineno}: invalid JSON ({exc.msg}); is the file complete?"
        ) from exc
    if not isinstance(state, dict):
        raise IngestError(f"{path}: expected a JSON object with 'log_history'")
    return state


def _raw(path: str | Path, entries: list[dict[str, Any]]) -> pl.DataFrame:
    if not entries:
        raise IngestError(f"{path}: log_history has no logged steps; nothing to ingest")
    names = list(dict.fromkeys(k for e in entries for k in e))
    # text keeps every value exact (repr round-trips) and lets one rule parse all columns
    rows = [{k: _text(v) for k, v in e.items()} for e in entries]
    frame = pl.from_dicts(rows, schema=dict.fromkeys(names, pl.Utf8))

    def locate(row: int) -> str:
        return f"{path}: log_history[{row}]"

    raw = tables.wide_to_raw(frame, step="step", wall=None, locate=locate, notes=tables.Notes())
    return tables.nonempty(raw, path)


def _text(value: Any) -> str | None:
    if value is None:
        return None  # Python's json writes NaN/inf as tokens: a null was never a number
    if isinstance(value, float):
        return repr(value)
    return value if isinstance(value, str) else json.dumps(value)


def _run_name(path: Path) -> str:
    """The run folder: ``out/checkpoint-500/trainer_state.json`` is run ``out``."""
    parent = path.parent
    if re.fullmatch(r"checkpoint-\d+", parent.name) and parent.parent.name:
        return parent.parent.name
    return parent.name or path.stem
