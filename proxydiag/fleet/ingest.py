"""The fleet ingest driver: hand sources to an executor, write what comes back.

Workers read; the driver is the store's only writer (each run through :meth:`RunStore.put`,
under the writer lock, journalled as ever), in the sources' order whatever the executor. A
source whose digest equals the one the store keeps for it is not read again (unless
``force``); one that fails is one ``(source, reason)`` and never costs the others' runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from proxydiag.errors import ProxydiagError, StoreLockedError
from proxydiag.fleet.executor import Executor
from proxydiag.fleet.index import source_digests
from proxydiag.fleet.tasks import Read, ReadSpec, SourceItem, read_source
from proxydiag.run import Run
from proxydiag.store import RunStore


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
    on_run: Callable[[Run], None] | None = None,
    on_item: Callable[[str], None] | None = None,
    task: Callable[[ReadSpec, SourceItem], Read] = read_source,
) -> IngestResult:
    """Read every ``(reader module, source)`` of ``work`` with ``executor`` into ``store``.

    ``on_run`` sees each stored run, ``on_item`` each finished source; ``task`` is what a
    worker runs per source (:func:`read_source`).
    """
    store.check_writable_place()  # a store that is a file ends the ingest before any read
    known: dict[str, str] = {}
    if skip_unchanged and not spec.force:
        with store.writing():  # grows a schema-1 catalog by the digest columns
            pass
        known = source_digests(store)
    items = [SourceItem(reader, source, known.get(source)) for reader, source in work]
    result = IngestResult()
    fn: Callable[[Any], Read] = partial(task, spec)
    for index, outcome in enumerate(executor.map(fn, items)):
        item: SourceItem = outcome.item
        if not outcome.ok:
            result.failures.append((index, item.source, outcome.reason))
        elif outcome.value.unchanged:
            result.skipped.append(item.source)
        else:
            _store(outcome.value, index, item.source, store=store, result=result, on_run=on_run)
        if on_item is not None:
            on_item(item.source)
    return result


def _store(
    read: Read,
    index: int,
    source: str,
    *,
    store: RunStore,
    result: IngestResult,
    on_run: Callable[[Run], None] | None,
) -> None:
    """Write the runs of one source; a run the store refuses is that source's failure (a
    store locked by another writer ends the whole ingest)."""
    for blob in read.runs:
        run = blob.run()
        try:
            result.stored.append(store.put(run, source_key=source, source_hash=read.digest))
        except StoreLockedError:
            raise
        except ProxydiagError as exc:
            result.failures.append((index, source, str(exc)))
            continue
        if on_run is not None:
            on_run(run)
