"""MLflow file stores (``mlruns/``), read as the text files they are, without the mlflow package.

Layout (``mlflow/store/tracking/file_store.py``)::

    mlruns/<experiment_id>/meta.yaml                 experiment name
    mlruns/<experiment_id>/<run_id>/meta.yaml        run name, lifecycle stage
    mlruns/<experiment_id>/<run_id>/metrics/<key>    "<ts ms> <value> <step>" lines
    mlruns/<experiment_id>/<run_id>/params/<key>     the value, as text
    mlruns/<experiment_id>/<run_id>/tags/<key>       the value, as text

A ``/`` in a key is a sub-folder. The source may be one run, one experiment, or the mlruns root.
A run whose ``meta.yaml`` is missing or unreadable is still read (with a warning): its name
comes from the ``mlflow.runName`` tag or the folder. Deleted runs are skipped when reading an
experiment or a root, and read when named directly. Runs come in start-time order. Metrics
proxydiag logged itself (``proxydiag.*``) are results, not training data, and are not read.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import ReadContext, is_uri
from proxydiag.ingest.contract import source_run
from proxydiag.ingest.mlflow._meta import (
    OWN_PREFIX,
    RUN_NAME_TAG,
    has_points,
    proxydiag_run_id,
    run_attrs,
)
from proxydiag.ingest.mlflow._metricfiles import metric_files, read_metrics
from proxydiag.run import Run

NAME = "mlflow_files"


def can_read(source: str | Path) -> bool:
    """A run folder, an experiment folder, or an mlruns root (cheap: looks at folder names)."""
    if is_uri(source):
        return False
    path = Path(source)
    return path.is_dir() and _kind(path) is not None


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    """Every live run under ``source`` (one run folder is read even when deleted)."""
    path = Path(source)
    kind = _kind(path)
    if kind is None:
        raise IngestError(f"{path}: not an MLflow file store (no <run>/metrics folder)")
    if kind == "run":
        return _runs([path], ctx, experiment=_experiment_name(path.parent), explicit=True)
    experiments = (
        [path] if kind == "experiment" else [e for e in _subdirs(path) if _is_experiment(e)]
    )
    runs: list[Run] = []
    for exp in experiments:
        run_dirs = [d for d in _subdirs(exp) if _is_run(d)]
        runs.extend(_runs(run_dirs, ctx, experiment=_experiment_name(exp), explicit=False))
    return runs


def _runs(
    run_dirs: list[Path], ctx: ReadContext, *, experiment: str | None, explicit: bool
) -> list[Run]:
    out = []
    for run_dir in run_dirs:
        run = _read_run(run_dir, ctx, experiment=experiment, explicit=explicit)
        if run is not None:
            out.append(run)
    return sorted(out, key=lambda r: (r.attrs.get("mlflow_start_time") or 0, r.id))


def _read_run(
    run_dir: Path, ctx: ReadContext, *, experiment: str | None, explicit: bool
) -> Run | None:
    meta = _read_meta(run_dir)
    if meta.get("lifecycle_stage") == "deleted" and not explicit:
        return None
    files = [(k, p) for k, p in metric_files(run_dir / "metrics") if not k.startswith(OWN_PREFIX)]
    raw = read_metrics(files)
    if not has_points(raw, where=str(run_dir)):
        return None
    params = _read_values(run_dir / "params")
    tags = _read_values(run_dir / "tags")
    mlflow_id = str(meta.get("run_id") or meta.get("run_uuid") or run_dir.name)
    name = _run_name(run_dir, meta, tags)
    attrs = run_attrs(
        mlflow_run_id=mlflow_id,
        experiment_id=str(meta.get("experiment_id") or run_dir.parent.name),
        tracking_uri=run_dir.parent.parent.resolve().as_uri(),
        params=params,
        tags=tags,
        where=str(run_dir),
    )
    attrs.update(
        run_id=proxydiag_run_id(name, mlflow_id),
        mlflow_experiment=experiment,
        mlflow_start_time=meta.get("start_time"),
    )
    return source_run(raw, run_dir, ctx, fmt=NAME, name=name, attrs=attrs, sidecar_of=run_dir)


def _run_name(run_dir: Path, meta: dict[str, Any], tags: dict[str, str]) -> str:
    return tags.get(RUN_NAME_TAG) or str(meta.get("run_name") or "") or run_dir.name


def run_name(run_dir: Path) -> str:
    """The name a run folder of a file store is read under (its ``mlflow.runName`` tag, its
    ``meta.yaml`` name, or the folder)."""
    return _run_name(run_dir, _read_meta(run_dir), _read_values(run_dir / "tags"))


#: MLflow's ``RunStatus.RUNNING`` as a file store writes it in a run's ``meta.yaml``
_RUNNING = (1, "RUNNING")


def running_run_dirs(root: Path, experiment: str) -> list[Path]:
    """The run folders of ``experiment`` (its name or id) in the file store at ``root`` whose
    run is running, read from the folders (MLflow 3's client refuses file stores unless told
    otherwise, and wanted a ``.trash`` folder)."""
    found: list[Path] = []
    for exp in _subdirs(root):
        if exp.name != experiment and _experiment_name(exp) != experiment:
            continue
        for run_dir in _subdirs(exp):
            if (run_dir / "meta.yaml").is_file() and _read_meta(run_dir).get("status") in _RUNNING:
                found.append(run_dir)
    return found


def _read_meta(folder: Path) -> dict[str, Any]:
    """A ``meta.yaml`` as a dict; missing or garbled gives ``{}`` and a warning."""
    import yaml  # 20 ms to import: only once a run folder is read, not to sniff a file

    path = folder / "meta.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problem = "missing"
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        problem = f"unreadable ({type(exc).__name__})"
    else:
        if isinstance(data, dict):
            return data
        problem = "not a mapping"
    warnings.warn(
        IngestWarning(f"{path}: {problem}; name and ids taken from tags and the folder"),
        stacklevel=4,
    )
    return {}


def _read_values(folder: Path) -> dict[str, str]:
    """params/ or tags/: one file per key (``/`` in a key is a folder), the value as text."""
    values: dict[str, str] = {}
    for key, path in metric_files(folder):
        try:
            values[key] = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise IngestError(f"{path}: cannot read ({exc.strerror})") from exc
    return values


def _experiment_name(folder: Path) -> str | None:
    meta = folder / "meta.yaml"
    if not meta.is_file():
        return None
    import yaml

    try:
        data = yaml.safe_load(meta.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return str(data["name"]) if isinstance(data, dict) and "name" in data else None


def _subdirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as entries:
            names = sorted(e.name for e in entries if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []
    return [path / n for n in names]


def _is_run(path: Path) -> bool:
    return (path / "metrics").is_dir() and (
        (path / "meta.yaml").is_file() or (path / "tags").is_dir() or (path / "params").is_dir()
    )


def _is_experiment(path: Path) -> bool:
    return any(_is_run(d) for d in _subdirs(path))


def _kind(path: Path) -> str | None:
    if _is_run(path):
        return "run"
    if _is_experiment(path):
        return "experiment"
    if any(_is_experiment(d) for d in _subdirs(path)):
        return "root"
    return None
