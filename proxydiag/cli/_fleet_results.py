"""Printing and keeping the results of fleet diagnose/compare, one item at a time, in order.

Each result is printed as the single-run command prints it (``--format json``: one JSON object
per line); each failed item is one ``error: SOURCE: REASON`` line on stderr after the results,
and the command then exits 2 (``--fail-on`` matches exit 1 when nothing failed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from proxydiag.cli._app import out
from proxydiag.cli._fleet import report_failures
from proxydiag.cli._results import Destination, keep_diagnosis, load
from proxydiag.errors import StoreError
from proxydiag.store import RunStore

if TYPE_CHECKING:
    from proxydiag.diagnose.config import DiagnoseConfig
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.config import FidelityConfig
    from proxydiag.fleet.analyse import Result
    from proxydiag.fleet.executor import Executor


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
    if not (store / "catalog.duckdb").exists():
        raise StoreError(f"{store}: no store here; ingest runs first (proxydiag ingest ... "
                         "--store DIR)")
    return RunStore(store)


def print_diagnosis(d: Diagnosis, fmt: str) -> None:
    """A diagnosis as ``proxydiag diagnose`` prints it."""
    from proxydiag.report.diagnosis import markdown, text

    if fmt == "json":
        out.print(json.dumps(d.to_dict()), markup=False, soft_wrap=True, highlight=False)
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


def source_diagnoses(sources: list[str], *, pool: Executor, config: DiagnoseConfig,
                     store: Path | None, aliases: Path | None, to: Destination, fmt: str,
                     failing: frozenset[str]) -> Tally:
    """Diagnose every run of ``sources`` on ``pool``; print and keep each in order."""
    from proxydiag.fleet.tasks import diagnose_source

    task: Callable[[Any], list[Diagnosis]] = partial(
        diagnose_source, config, {"store": store, "aliases": aliases})
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
                RunStore(to.store).put_diagnosis(d)
            tally.matched = tally.matched or d.label in failing
    return tally


def stored_comparisons(store: Path, *, pool: Executor, group: str | None, align: str,
                       config: FidelityConfig | None, force: bool,
                       failing: frozenset[str]) -> Tally:
    """``compare --store DIR [--group G]``: one JSON line per proxy (kept in the store)."""
    from proxydiag.fleet.analyse import compare_all

    existing(store)
    tally = Tally()
    for result in compare_all(RunStore(store), executor=pool, config=config, align=align,
                              group=group, force=force):
        if result.reason:
            tally.failures.append((result.key, result.reason))
            continue
        out.print(json.dumps(result.value), markup=False, soft_wrap=True, highlight=False)
        tally.matched = tally.matched or result.value.get("verdict") in failing
    return tally
