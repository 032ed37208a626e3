"""Fleet work items, as they run on a worker: read a source, diagnose a run, compare a proxy.

Each function is module-level and takes picklable arguments (a worker process or a Ray node
imports this module and calls it), reads what it needs itself (a path on shared storage, an
MLflow URI, a run file of the store) and returns a compact result: runs as
:class:`~proxydiag.run.ipc.RunBlob` (a run's Arrow IPC form), a
:class:`~proxydiag.diagnose.result.Diagnosis` or a :class:`~proxydiag.fidelity.result.Comparison`.
Nothing here writes to the catalog: a read asked to (``ReadSpec.stage``) writes its runs'
files to the driver's staging directory of the store and sends back their catalog rows, for
the driver to commit in batches.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from proxydiag.errors import IngestError
from proxydiag.fleet.digest import source_digest
from proxydiag.run import Run
from proxydiag.run.ipc import RunBlob
from proxydiag.store import Staged, stage

if TYPE_CHECKING:
    from proxydiag.diagnose.config import DiagnoseConfig
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison
    from proxydiag.ingest import ReadContext, Reader
    from proxydiag.pipeline import Settings


@dataclass(frozen=True)
class ReadSpec:
    """How every source of one ingest is read: the reading context, the role/group overrides,
    and a digest of all that (part of each source's digest)."""

    ctx: ReadContext
    role: str | None = None
    group: str | None = None
    config_digest: str = ""
    force: bool = False
    #: ``(store, staging directory)``: the worker writes each run's file there and sends
    #: back only its catalog row (None, or a directory this worker does not see: the runs
    #: themselves go back, as Arrow bytes)
    stage: tuple[str, str] | None = None


def reader_name(reader: Reader) -> str:
    """The name ``reader`` is registered under in :data:`proxydiag.ingest.READERS` (what a
    work item carries: a worker looks the reader up by it), else its module's dotted path."""
    from proxydiag.ingest import READERS

    for name, known in READERS.items():
        if known is reader:
            return name
    return str(getattr(reader, "__name__", reader))  # a module a worker can import


@dataclass(frozen=True)
class SourceItem:
    """One source to read with the reader registered as ``reader``; ``known``: the digest the
    store holds for it (reading is skipped when the source still has that digest); ``state``:
    what the driver learnt of a URI source that tells whether it changed (an MLflow run's,
    from the experiment's search)."""

    reader: str
    source: str
    known: str | None = None
    state: str | None = None


@dataclass(frozen=True)
class Read:
    """What reading a source gave: its digest and runs (none when ``unchanged``), either as
    blobs or, when the worker staged their files in the store, as catalog rows."""

    digest: str | None
    runs: tuple[RunBlob, ...] = ()
    unchanged: bool = False
    staged: tuple[Staged, ...] = ()


def read_source(spec: ReadSpec, item: SourceItem) -> Read:
    """Read ``item`` (unless its digest equals the one the store holds) into run blobs."""
    digest = source_digest(
        item.source, reader=item.reader, config=spec.config_digest, state=item.state
    )
    if digest is not None and digest == item.known and not spec.force:
        return Read(digest, unchanged=True)
    runs: list[Run] = _reader(item.reader).read(_path_or_uri(item.source), spec.ctx)
    if not runs:
        raise IngestError(f"{item.source}: no runs in this source; nothing to ingest")
    for run in runs:
        if spec.role is not None:
            run.attrs["role"] = spec.role
        if spec.group is not None:
            run.attrs["group"] = spec.group
    if spec.stage is not None and (Path(spec.stage[0]) / spec.stage[1]).is_dir():
        return Read(digest, staged=tuple(stage(*spec.stage, run) for run in runs))
    return Read(digest, tuple(RunBlob.of(run) for run in runs))


def _reader(name: str) -> Reader:
    """The reader registered as ``name``, else the module of that dotted path (a reader a
    plugin registered in the driver only: the worker imports it)."""
    from proxydiag.ingest import READERS

    if name in READERS:
        return READERS[name]
    try:
        module: Reader = importlib.import_module(name)  # type: ignore[assignment]
    except ImportError as exc:
        raise IngestError(
            f"reader {name!r}: neither registered nor importable on this worker ({exc})"
        ) from exc
    return module


def _path_or_uri(source: str) -> str | Path:
    from proxydiag.ingest import is_uri

    return source if is_uri(source) else Path(source)


def diagnose_stored(store: str, config: DiagnoseConfig, run_id: str) -> Diagnosis:
    """Diagnose the stored run ``run_id`` (its file read directly; no lock taken)."""
    from proxydiag.diagnose.api import diagnose
    from proxydiag.store import RunStore

    return diagnose(RunStore(store).get(run_id), config=config)


@dataclass(frozen=True)
class ProxyItem:
    """One proxy to compare against its group's full runs (run ids in ``store``)."""

    proxy: str
    full: tuple[str, ...]
    known: str | None = None


def compare_stored(
    store: str,
    settings: Settings | None,
    align: str,
    item: ProxyItem,
) -> Comparison:
    """Compare the stored proxy against its full runs (each read and diagnosed here, with the
    same settings)."""
    from proxydiag.pipeline import Analysis
    from proxydiag.store import RunStore

    runs = RunStore(store)
    fulls = [runs.get(rid) for rid in item.full]
    return Analysis(settings).compare(fulls, runs.get(item.proxy), align=align)
