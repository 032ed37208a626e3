"""Run metadata for file sources: the ``proxydiag.json`` sidecar.

Role (``full``/``proxy``), group, seed, experts kept and in total, cost per step and precision
come from MLflow tags/params, or for files from a sidecar ``proxydiag.json`` in the run's
directory (or ``<file>.proxydiag.json``). Its fields override what a reader inferred.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proxydiag.errors import IngestError
from proxydiag.run import PLAN_ATTRS

SIDECAR = "proxydiag.json"


_SIDECAR_FIELDS = (
    *PLAN_ATTRS,
    "step_kind",
    "notes",
    "name",
    "log_interval",
    "params",
    "tags",
)


def sidecar_for(path: Path) -> Path:
    """Where a source's sidecar lives: ``<dir>/proxydiag.json`` or ``<file>.proxydiag.json``
    (falling back to ``proxydiag.json`` beside the file)."""
    if path.is_dir():
        return path / SIDECAR
    own = path.with_name(path.name + "." + SIDECAR)
    return own if own.exists() else path.parent / SIDECAR


def read_sidecar(path: Path) -> dict[str, Any]:
    """Read a sidecar; absent means no metadata. Unknown fields go into ``attrs['notes']``."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(
            f"{path}: invalid proxydiag.json sidecar ({exc}); fix or remove it"
        ) from exc
    if not isinstance(data, dict):
        raise IngestError(f"{path}: a proxydiag.json sidecar must hold a JSON object")
    out = {k: data[k] for k in _SIDECAR_FIELDS if k in data}
    extra = {k: v for k, v in data.items() if k not in _SIDECAR_FIELDS}
    if extra:
        out["extra"] = extra
    return out
