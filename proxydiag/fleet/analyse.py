"""The fleet analysis drivers: every stored run diagnosed, every stored proxy compared.

Work items are per run (read its file + diagnose) and per proxy (read it and its group's full
runs + compare); they go to an executor and come back in run-id order. The driver keeps each
new result in the store with the digest of its inputs (the runs' content digests, the
configuration, proxydiag's version); a result whose inputs are unchanged is taken from the
store instead of computed again, unless ``force``. With ``keep=False`` (the dashboard) the
store is only read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from proxydiag.diagnose.result import Diagnosis
from proxydiag.errors import AnalysisError
from proxydiag.fleet._batch import Batcher, Batching
from proxydiag.fleet.digest import config_digest, config_digests
from proxydiag.fleet.executor import Executor
from proxydiag.fleet.index import kept_results, run_index
from proxydiag.fleet.tasks import ProxyItem, compare_stored, diagnose_stored
from proxydiag.store import RunStore, comparison_key

if TYPE_CHECKING:
    from proxydiag.diagnose.config import DiagnoseConfig
    from proxydiag.pipeline import Settings


@dataclass(frozen=True)
class Result:
    """One item's answer: ``value`` (a Diagnosis, or a Comparison's dict) or ``reason``;
    ``made``: the Comparison itself when it was made now (its numbers unrounded)."""

    key: str
    value: Any = None
    reason: str = ""
    reused: bool = False
    made: Any = None


def diagnose_all(
    store: RunStore,
    *,
    executor: Executor,
    config: DiagnoseConfig,
    force: bool = False,
    keep: bool = True,
    only: set[str] | None = None,
    batching: Batching = Batching(),
) -> Iterator[Result]:
    """Every stored run's Diagnosis (or failure), in run-id order; ``only`` limits the runs;
    new diagnoses are kept in batches of ``batching``."""
    _grow(store, keep=keep)
    runs = run_index(store)
    if only is not None:
        runs = runs.filter(pl.col("run").is_in(sorted(only)))
    kept = {} if force else kept_results(store, "diagnosis")
    digests = dict(
        zip(
            runs["run"],
            config_digests("diagnose", runs["content_hash"].to_list(), config),
            strict=True,
        )
    )
    todo = [rid for rid in runs["run"] if kept.get(rid, ("",))[0] != digests[rid]]
    made = executor.map(partial(diagnose_stored, str(store.path), config), todo)
    fresh = set(todo)
    batch = Batcher(store.put_diagnoses, batching)
    try:
        for rid in runs["run"]:
            if rid not in fresh:
                yield Result(rid, Diagnosis.from_dict(kept[rid][1]), reused=True)
                continue
            outcome = next(made)
            if not outcome.ok:
                yield Result(rid, reason=outcome.reason)
                continue
            if keep:
                batch.add((outcome.value, digests[rid]))
            yield Result(rid, outcome.value)
    finally:
        batch.close()


def group_fulls(runs: pl.DataFrame) -> dict[str, tuple[str, ...]]:
    """Each group's full runs (every run whose role is not ``proxy``), the reference first:
    by seed (none last), then name, then run id. One order for ``compare --store``,
    ``report --group`` and the dashboard, whatever order the runs were ingested in.

    >>> runs = pl.DataFrame({"run": ["c", "b", "a", "p"], "name": ["c", "b", "a", "p"],
    ...     "role": [None, "full", "full", "proxy"], "group": ["g"] * 4,
    ...     "seed": [None, 1, 1, 0]})
    >>> group_fulls(runs)
    {'g': ('a', 'b', 'c')}
    """
    fulls = (
        runs.filter(pl.col("group").is_not_null() & (pl.col("role").fill_null("") != "proxy"))
        .with_columns(pl.col("seed").fill_null(1 << 30).alias("_order"))
        .sort("group", "_order", "name", "run")
    )
    return {g: tuple(f["run"]) for (g,), f in fulls.group_by("group", maintain_order=True)}


def proxy_items(store: RunStore, *, group: str | None = None) -> list[ProxyItem]:
    """Every proxy with a group (or of ``group``), each with its group's full runs (ordered by
    seed, then name: the first is the reference), in proxy run-id order."""
    runs = run_index(store)
    if group is not None and group not in set(runs["group"].drop_nulls()):
        groups = ", ".join(sorted(set(runs["group"].drop_nulls()))) or "none"
        raise AnalysisError(f"{store.path}: no runs in group {group!r}; groups: {groups}")
    grouped = runs.filter(
        pl.col("group").is_not_null()
        & (pl.col("group") == group if group is not None else pl.lit(True))
    )
    members = group_fulls(grouped)
    proxies = grouped.filter(pl.col("role") == "proxy")
    return [
        ProxyItem(rid, members.get(g, ()))
        for rid, g in zip(proxies["run"], proxies["group"], strict=True)
    ]


def compare_all(
    store: RunStore,
    *,
    executor: Executor,
    config: Settings | None,
    align: str = "step",
    group: str | None = None,
    force: bool = False,
    keep: bool = True,
    only: set[str] | None = None,
    batching: Batching = Batching(),
) -> Iterator[Result]:
    """Every proxy's Comparison dict (or failure) against its group's full runs, diagnosed and
    compared with ``config`` (the defaults for None); ``only`` limits the proxies; new
    comparisons are kept in batches of ``batching``."""
    from proxydiag.pipeline import Settings

    settings = config or Settings()
    _grow(store, keep=keep)
    items = [i for i in proxy_items(store, group=group) if only is None or i.proxy in only]
    content = dict(zip(*run_index(store).select("run", "content_hash"), strict=True))
    kept = {} if force else kept_results(store, "comparison")
    digests = {
        i.proxy: config_digest(
            "compare", content[i.proxy], [content[f] for f in i.full], settings.digest, align
        )
        for i in items
    }
    todo = [
        i
        for i in items
        if i.full and kept.get(comparison_key(i.proxy, i.full), ("",))[0] != digests[i.proxy]
    ]
    made = executor.map(partial(compare_stored, str(store.path), settings, align), todo)
    fresh = set(todo)
    batch = Batcher(store.put_comparisons, batching)
    try:
        for item in items:
            if not item.full:
                yield Result(
                    item.proxy, reason=f"{item.proxy}: its group has no full run to compare with"
                )
            elif item not in fresh:
                key = comparison_key(item.proxy, item.full)
                yield Result(item.proxy, kept[key][1], reused=True)
            else:
                yield _kept_comparison(next(made), batch, digests[item.proxy], keep=keep)
    finally:
        batch.close()


def _kept_comparison(outcome: Any, batch: Batcher, digest: str, *, keep: bool) -> Result:
    item: ProxyItem = outcome.item
    if not outcome.ok:
        return Result(item.proxy, reason=outcome.reason)
    if keep:
        batch.add((outcome.value, digest))
    return Result(item.proxy, outcome.value.to_dict(), made=outcome.value)


def _grow(store: RunStore, *, keep: bool) -> None:
    """Grow a schema-1 catalog by the digest columns (a writer's first act) before reading."""
    if keep:
        with store.writing():
            pass
