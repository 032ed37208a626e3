"""The fleet ingest driver: hand sources to an executor, commit what comes back in batches.

Workers read each source and write its runs' files into the driver's staging directory of the
store (atomically, as every store write); they send back only the catalog rows. The driver
commits those in batches (:mod:`proxydiag.fleet._batch`): the staged files renamed into
``runs/`` and their rows written in one catalog transaction, journalled so that a driver
killed mid-batch is rolled forward by the next writer. A worker that cannot see the staging
directory (a store not on storage it shares) sends its runs back and the driver stages them.
Runs are committed in the sources' order whatever the executor. A source whose digest equals
the one the store keeps for it is not read again (unless ``force``); one that fails is one
``(source, reason)`` and never costs the others' runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from proxydiag.errors import ProxydiagError, StoreLockedError
from proxydiag.fleet._batch import Batcher, Batching
from proxydiag.fleet.executor import Executor
from proxydiag.fleet.index import source_digests
from proxydiag.fleet.tasks import Read, ReadSpec, SourceItem, read_source
from proxydiag.store import RunStore, Staged, stage


@dataclass
class IngestResult:
    """Runs stored (in order), sources skipped as unchanged, and ``(index, source, reason)``
    failures (``index``: the source's place in the work)."""

    stored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[tuple[int, str, str]] = field(default_factory=list)


def ingest_sources(
    work: Sequence[tuple[str, str]],
    *,
    store: RunStore,
    executor: Executor,
    spec: ReadSpec,
    skip_unchanged: bool,
    on_run: Callable[[Staged], None] | None = None,
    on_item: Callable[[str], None] | None = None,
    task: Callable[[ReadSpec, SourceItem], Read] = read_source,
    batching: Batching = Batching(),
    states: Mapping[str, str | None] | None = None,
) -> IngestResult:
    """Read every ``(reader module, source)`` of ``work`` with ``executor`` into ``store``.

    ``on_run`` sees each stored run (once its batch is committed), ``on_item`` each finished
    source; ``task`` is what a worker runs per source (:func:`read_source`); ``batching``
    bounds the runs the driver commits at once; ``states``: each URI source's state (an
    MLflow run's, from the experiment's search), which makes it skippable when unchanged.
    """
    store.check_writable_place()  # a store that is a file ends the ingest before any read
    with store.staging() as staging:  # also grows a schema-1 catalog by the digest columns
        known = source_digests(store) if skip_unchanged and not spec.force else {}
        states = states or {}
        items = [
            SourceItem(reader, source, known.get(source), states.get(source))
            for reader, source in work
        ]
        result = IngestResult()
        staged_spec = dataclasses.replace(spec, stage=(str(store.path), staging))
        batch = Batcher(partial(_commit, store=store, result=result, on_run=on_run), batching)
        fn: Callable[[Any], Read] = partial(task, staged_spec)
        for index, outcome in enumerate(executor.map(fn, items)):
            item: SourceItem = outcome.item
            if not outcome.ok:
                result.failures.append((index, item.source, outcome.reason))
            elif outcome.value.unchanged:
                result.skipped.append(item.source)
            else:
                for staged in _staged(outcome.value, index, item.source, store, staging, result):
                    batch.add((index, item.source, staged, outcome.value.digest))
            if on_item is not None:
                on_item(item.source)
        batch.close()
    return result


def _staged(
    read: Read, index: int, source: str, store: RunStore, staging: str, result: IngestResult
) -> list[Staged]:
    """The staged runs of one source: as the worker staged them, or staged here from the runs
    it sent back (a run the store refuses is that source's failure)."""
    staged = list(read.staged)
    for blob in read.runs:
        try:
            staged.append(stage(store.path, staging, blob.run()))
        except ProxydiagError as exc:
            result.failures.append((index, source, str(exc)))
    return staged


def _commit(
    batch: list[tuple[int, str, Staged, str | None]],
    *,
    store: RunStore,
    result: IngestResult,
    on_run: Callable[[Staged], None] | None,
) -> None:
    """Commit one batch; a store that refuses it fails its sources (a store locked by another
    writer ends the whole ingest)."""
    try:
        store.commit([(staged, source, digest) for _, source, staged, digest in batch])
    except StoreLockedError:
        raise
    except ProxydiagError as exc:
        for index, source in dict.fromkeys((i, s) for i, s, _, _ in batch):
            result.failures.append((index, source, str(exc)))
        return
    for _, _, staged, _ in batch:
        result.stored.append(staged.run)
        if on_run is not None:
            on_run(staged)
