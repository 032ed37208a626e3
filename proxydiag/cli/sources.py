"""Resolve a command-line SOURCE: a path, an MLflow run URI, or a run id already in the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxydiag.errors import IngestError
from proxydiag.ingest import is_uri, read_run, read_runs
from proxydiag.run import Run


def load(source: str, *, store: Path | None = None, **read_options: Any) -> list[Run]:
    """Runs named by ``source``.

    A path or URI is read with :func:`proxydiag.read_runs`; otherwise ``source`` is looked up
    as a run id (or unique name) in ``store``.
    """
    if _readable(source):
        return read_runs(source, **read_options)
    return [_stored(source, store=store)]


def load_one(source: str, *, store: Path | None = None, **read_options: Any) -> Run:
    """The one run named by ``source``; a source holding several fails before reading them."""
    if _readable(source):
        return read_run(source, **read_options)
    return _stored(source, store=store)


def _readable(source: str) -> bool:
    looks_like_uri = is_uri(source)
    return looks_like_uri or Path(source).exists()


def _stored(source: str, *, store: Path | None) -> Run:
    if store is not None:
        from proxydiag.store import RunStore, has_catalog

        if has_catalog(store):
            return RunStore(store).get(source)
    if store is None:
        raise IngestError(f"{source}: no such file, directory, or MLflow URI")
    raise IngestError(f"{source}: no such file, directory, MLflow URI, or run in store {store}")
