"""The name a watched source's alerts carry: the one ``diagnose`` and ``--replay`` give the
same run, so a live alert, the final answer and a later report speak of one run.

- a sidecar's ``name`` (``proxydiag.json``) when there is one;
- a TensorBoard logdir or event file: its folder's name, or the first parent whose name says
  something (``exp/grpo-7b/tb`` is ``grpo-7b``), as the offline reader names it;
- an MLflow file-store run folder: its ``mlflow.runName`` tag, or its ``meta.yaml`` name;
- a log file: its stem (``console.log`` is ``console``); ``runs:/ID``: the run id.

Two sources that would get the same name are told apart by their paths (:func:`distinct`).

>>> display_name("runs:/0a1b2c")
'0a1b2c'
>>> display_name("/exp/grpo-7b/tb"), display_name("/exp/grpo-7b/metrics.jsonl")
('grpo-7b', 'metrics')
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from proxydiag.errors import ProxydiagError
from proxydiag.ingest.mlflow.files import run_name as mlflow_run_name
from proxydiag.ingest.tensorboard import GENERIC_DIRS, run_name
from proxydiag.ingest.tensorboard.tail import MARK
from proxydiag.run.sidecar import SIDECAR, read_sidecar, sidecar_for


def display_name(source: str) -> str:
    """The run name of ``source`` (see the module docstring)."""
    if source.startswith("runs:/"):
        return source[len("runs:/") :].strip("/") or source
    path = Path(source)
    named = _sidecar_name(path)
    if named:
        return named
    if path.is_dir() and (path / "meta.yaml").is_file():
        return mlflow_run_name(path)
    if MARK in path.name:
        return run_name(path.resolve().parent)
    if path.is_dir() or (not path.exists() and not path.suffix):
        return run_name(path.resolve())  # a logdir (or one not created yet)
    return path.stem or source


def distinct(sources: Iterable[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """Names for ``sources``, each unique among them and ``taken``: a name already in use is
    followed by its source's path.

    >>> distinct(["a/tb", "b/tb", "c/tb"], taken=["c"])
    {'a/tb': 'a', 'b/tb': 'b', 'c/tb': 'c (c/tb)'}
    """
    used = set(taken)
    out: dict[str, str] = {}
    for source in sources:
        name = display_name(source)
        if name in used:
            name = f"{name} ({source})"
        used.add(name)
        out[source] = name
    return out


def _sidecar_name(path: Path) -> str:
    candidates = [sidecar_for(path)]
    directory = path if path.is_dir() else path.parent
    if directory.name.lower() in GENERIC_DIRS:
        candidates += [
            d / SIDECAR for d in directory.parents if d.name.lower() not in GENERIC_DIRS
        ][:1]
    for side in candidates:
        try:
            name = read_sidecar(side).get("name")
        except ProxydiagError:
            continue  # an invalid sidecar is the offline reader's to report
        if name:
            return str(name)
    return ""
