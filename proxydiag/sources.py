"""Resolve a command-line SOURCE: a path, an MLflow run URI, or a run id already in the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxydiag.errors import IngestError
from proxydiag.ingest import read_runs
from proxydiag.run import Run


def load(source: str, *, store: Path | None = None, **read_options: Any) -> list[Run]:
    """Runs named by ``source``.

    A path or URI is read with :func:`proxydiag.read_runs`; otherwise ``source`` is looked up
    as a run id (or unique name) in ``store``.
    """
    looks_like_uri = "://" in source or source.startswith("runs:/")
    if looks_like_uri or Path(source).exists():
        return read_runs(source, **read_options)
    if store is not None and (store / "catalog.duckdb").exists():
        from proxydiag.store import RunStore

        return [RunStore(store).get(source)]
    raise IngestError(f"{source}: no such file, directory, MLflow URI, or run in store {store}")
