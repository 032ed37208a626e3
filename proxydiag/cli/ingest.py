"""``proxydiag ingest SOURCE...``: read runs into the store.

Every source is read and its runs stored atomically (a fleet's runs in batches, each batch one
catalog transaction: :mod:`proxydiag.fleet.ingest`). A source that fails does not
stop the others and never touches what is stored: the good runs are kept, each failure is one
``error:`` line on stderr naming the file, and the exit code is 2 if anything failed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from proxydiag.cli._app import app, err
from proxydiag.cli._fleet import report_failures
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    DEFAULT_STORE,
    AliasesOpt,
    FilterOpt,
    Fleet,
    ForceOpt,
    GroupOpt,
    LockTimeoutOpt,
    MlflowExperimentOpt,
    RoleOpt,
    StoreOpt,
    TrackingOpt,
)
from proxydiag.cli.show import cell, show
from proxydiag.errors import ProxydiagError

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table

    from proxydiag.store import Staged

#: summary rows printed before eliding the rest
MAX_ROWS = 40


@command(app)
def ingest(
    sources: Annotated[
        list[str] | None, typer.Argument(help="files, directories or MLflow run URIs")
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    role: RoleOpt = None,
    group: GroupOpt = None,
    aliases: AliasesOpt = None,
    lock_timeout_s: LockTimeoutOpt = 10.0,
    mlflow_experiment: MlflowExperimentOpt = None,
    mlflow_filter: FilterOpt = "",
    tracking_uri: TrackingOpt = None,
    fleet: Fleet = Fleet(),
    force: ForceOpt = False,
) -> None:
    """Read runs (any supported format) into the store; re-ingesting a source replaces it."""
    from proxydiag.fleet.digest import config_digest, file_digest
    from proxydiag.fleet.ingest import ingest_sources
    from proxydiag.fleet.tasks import ReadSpec, reader_name
    from proxydiag.ingest import ReadContext, discover
    from proxydiag.ingest.mlflow import rest as mlflow_rest
    from proxydiag.ingest.mlflow import uri as mlflow_uri
    from proxydiag.metrics import AliasTable
    from proxydiag.store import RunStore
    from proxydiag.tracking import resolve_tracking_uri

    options: dict[str, Any] = {"tracking_uri": tracking_uri} if tracking_uri else {}
    if os.environ.get(mlflow_rest.REQUESTS_ENV):  # sent with the work: Ray workers obey it too
        options["requests"] = mlflow_rest.request_bound({})
    ctx = ReadContext(AliasTable.load(aliases) if aliases else AliasTable.default(), options)
    target = RunStore(store, lock_timeout_s=lock_timeout_s)
    pool = fleet.executor()
    stored = _Stored()
    failures: list[tuple[int, str, str]] = []  # (place in the work, source, reason)
    work: list[tuple[str, str]] = []  # (reader name, source)
    states: dict[str, str | None] = {}  # an MLflow run's state: unchanged runs are not re-read
    if not sources and not mlflow_experiment:
        raise typer.BadParameter("give SOURCE... and/or --mlflow-experiment NAME")
    if mlflow_experiment:  # MLflow selects the runs; each is then read by the fastest route
        uri = resolve_tracking_uri(tracking_uri)
        for rid, state in mlflow_uri.search_states(mlflow_experiment, mlflow_filter, uri):
            work.append((reader_name(mlflow_uri), f"runs:/{rid}"))
            states[f"runs:/{rid}"] = None if state is None else f"{uri}\n{state}"
    for source in sources or []:
        try:
            work.extend(
                (reader_name(reader), str(item)) for reader, item in discover(_absolute(source))
            )
        except ProxydiagError as exc:
            failures.append((len(work), _absolute(source), str(exc)))
    spec = ReadSpec(
        ctx,
        role=role.value if role else None,
        group=group,
        force=force,
        config_digest=config_digest(file_digest(aliases), role and role.value, group, tracking_uri),
    )
    # a fleet (several sources, or workers) skips unchanged sources; one source is re-read
    skip_unchanged = len(work) > 1 or pool.name != "serial"
    with _progress() as progress:
        task = progress.add_task("ingest", total=len(work))
        result = ingest_sources(
            work,
            store=target,
            executor=pool,
            spec=spec,
            skip_unchanged=skip_unchanged,
            on_run=stored.add,
            on_item=lambda item: progress.update(task, advance=1, description=_short(item)),
            states=states,
        )
    # in the sources' order: a source that could not be listed before the ones listed after it
    failures = sorted([*failures, *result.failures], key=lambda f: (f[0], f in result.failures))
    if result.skipped:
        err.print(
            f"{len(result.skipped)} source(s) unchanged since they were stored, not read "
            "again (--force reads them)",
            markup=False,
        )
    if stored.count:
        show(_table(stored, store=target.path))
    if report_failures((source, reason) for _, source, reason in failures):
        raise typer.Exit(2)
    if not stored.count and not result.skipped:
        err.print(
            f"error: {' '.join(sources or [])}: no runs found; nothing to ingest", markup=False
        )
        raise typer.Exit(2)


def _absolute(source: str) -> str:
    """Paths are made absolute so that a run's id does not depend on the working directory."""
    from proxydiag.ingest import is_uri

    if is_uri(source):
        return source
    return str(Path(source).absolute())


class _Stored:
    """The stored runs the summary table shows (the first :data:`MAX_ROWS`) and how many there
    were: the driver's memory stays flat over many runs."""

    def __init__(self) -> None:
        self.count = 0
        self.rows: list[dict[str, Any]] = []

    def add(self, staged: Staged) -> None:
        self.count += 1
        if len(self.rows) < MAX_ROWS:
            self.rows.append(staged.row)


def _progress() -> Progress:
    # imported here: rich.progress costs ~25 ms on every command's start-up, --help included
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


def _short(item: str | Path, width: int = 40) -> str:
    text = str(item)
    return text if len(text) <= width else "…" + text[-width + 1 :]


def _table(stored: _Stored, *, store: Path) -> Table:
    from rich.table import Table

    table = Table(title=cell(f"{stored.count} run(s) stored in {store}"), title_justify="left")
    for column in ("run", "name", "format", "points", "metrics", "steps", "role", "group"):
        table.add_column(
            column,
            justify="right" if column in ("points", "metrics") else "left",
            no_wrap=column == "run",
        )
    for row in stored.rows:
        table.add_row(
            cell(row["run"]),
            cell(row["name"]),
            cell(row["format"]),
            f"{row['n_points']:,}",
            str(row["n_metrics"]),
            f"{row['first_step']}–{row['last_step']}" if row["n_points"] else "",
            cell(row["role"]),
            cell(row["group"]),
        )
    if stored.count > MAX_ROWS:
        table.add_row(f"… and {stored.count - MAX_ROWS} more", *[""] * 7)
    return table


from proxydiag.cli import runs as _runs  # noqa: E402,F401  (registers `proxydiag runs`)
