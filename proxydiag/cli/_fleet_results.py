"""Printing and keeping the results of fleet diagnose/compare, one item at a time, in order.

Each result is printed as the single-run command prints it (``--format json``: one JSON object
per line); each failed item is one ``error: SOURCE: REASON`` line on stderr after the results,
and the command then exits 2 (``--fail-on`` matches exit 1 when nothing failed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from proxydiag.cli._app import json_line, out
from proxydiag.cli._fleet import report_failures
from proxydiag.cli._options import Destination
from proxydiag.cli._results import keep_diagnosis, load
from proxydiag.errors import StoreError

if TYPE_CHECKING:
    from proxydiag.diagnose.config import DiagnoseConfig
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison
    from proxydiag.fleet.analyse import Result
    from proxydiag.fleet.executor import Executor
    from proxydiag.pipeline import Settings
    from proxydiag.report.jobs import Job
    from proxydiag.store import RunStore


@dataclass
class Tally:
    """What the printed results amount to: failed items and ``--fail-on`` matches."""

    failures: list[tuple[str, str]] = field(default_factory=list)
    matched: bool = False

    def finish(self) -> None:
        """Exit 2 after the failures' lines, or 1 on a ``--fail-on`` match."""
        if report_failures(self.failures):
            raise typer.Exit(2)
        if self.matched:
            raise typer.Exit(1)


def existing(store: Path) -> RunStore:
    """The store at ``store``; a one-line error where there is none (a fleet command over a
    store never creates one)."""
    from proxydiag.store import RunStore, has_catalog

    if not has_catalog(store):
        raise StoreError(
            f"{store}: no store here; ingest runs first (proxydiag ingest ... --store DIR)"
        )
    return RunStore(store)


def print_diagnosis(d: Diagnosis, fmt: str) -> None:
    """A diagnosis as ``proxydiag diagnose`` prints it."""
    from proxydiag.report.diagnosis import markdown, text

    if fmt == "json":
        json_line(json.dumps(d.to_dict()))
    else:
        out.print(markdown(d) if fmt == "markdown" else text(d), markup=False)
        out.print("")


def stored_diagnoses(results: Iterable[Result], *, fmt: str, failing: frozenset[str]) -> Tally:
    """Print ``diagnose --store DIR --all``'s results (the driver kept them already)."""
    tally = Tally()
    for result in results:
        if result.reason:
            tally.failures.append((result.key, result.reason))
            continue
        print_diagnosis(result.value, fmt)
        tally.matched = tally.matched or result.value.label in failing
    return tally


def diagnose_source(
    config: DiagnoseConfig,
    read_options: dict[str, Any],
    source: str,
) -> list[Diagnosis]:
    """The work item of ``diagnose SOURCE...`` (run on a worker): diagnose every run of a CLI
    source (a path, an MLflow URI, or a run id in a store)."""
    from proxydiag.cli.sources import load as load_source
    from proxydiag.diagnose.api import diagnose

    return [
        diagnose(run, config=config, source=source) for run in load_source(source, **read_options)
    ]


def source_diagnoses(
    sources: list[str],
    *,
    pool: Executor,
    config: DiagnoseConfig,
    store: Path | None,
    aliases: Path | None,
    to: Destination,
    fmt: str,
    failing: frozenset[str],
) -> Tally:
    """Diagnose every run of ``sources`` on ``pool``; print and keep each in order."""
    task: Callable[[Any], list[Diagnosis]] = partial(
        diagnose_source, config, {"store": store, "aliases": aliases}
    )
    tally = Tally()
    for outcome in pool.map(task, sources):
        if not outcome.ok:
            tally.failures.append((outcome.item, outcome.reason))
            continue
        # logging to MLflow attaches the report, drawn from the run: read again here for it
        runs = load(outcome.item, store, aliases) if to.mlflow else []
        for index, d in enumerate(outcome.value):
            print_diagnosis(d, fmt)
            if to.mlflow:
                keep_diagnosis(d, runs[index], to=to)
            elif to.store is not None:
                from proxydiag.store import RunStore

                RunStore(to.store).put_diagnosis(d)
            tally.matched = tally.matched or d.label in failing
    return tally


def stored_comparisons(
    store: Path,
    *,
    pool: Executor,
    group: str | None,
    align: str,
    config: Settings | None,
    force: bool,
    failing: frozenset[str],
) -> Tally:
    """``compare --store DIR [--group G]``: one JSON line per proxy (kept in the store)."""
    from proxydiag.fleet.analyse import compare_all

    tally = Tally()
    for result in compare_all(
        existing(store), executor=pool, config=config, align=align, group=group, force=force
    ):
        if result.reason:
            tally.failures.append((result.key, result.reason))
            continue
        json_line(json.dumps(result.value))
        tally.matched = tally.matched or result.value.get("verdict") in failing
    return tally


def group_results(
    jobs: Sequence[Job],
    *,
    store: Path,
    pool: Executor,
    align: str,
    settings: Settings | None = None,
) -> tuple[dict[str, Diagnosis], dict[str, Comparison]]:
    """``report --group``'s analyses as work items on ``pool``: each run's diagnosis and each
    proxy's comparison (with ``settings``, as the report makes them). An item that fails is
    left out: the report then makes it itself, and says its error as it always did."""
    from proxydiag.fleet.tasks import ProxyItem, compare_stored, diagnose_stored
    from proxydiag.pipeline import Settings

    settings = settings or Settings()

    ids = list(dict.fromkeys(run.id for job in jobs for run in job.every))
    diagnoses = {
        o.item: o.value
        for o in pool.map(partial(diagnose_stored, str(store), settings.diagnose), ids)
        if o.ok
    }
    items = [
        ProxyItem(job.proxy.id, tuple(run.id for run in job.full))
        for job in jobs
        if job.proxy is not None
    ]
    comparisons = {
        o.item.proxy: o.value
        for o in pool.map(partial(compare_stored, str(store), settings, align), items)
        if o.ok
    }
    return diagnoses, comparisons
