"""``proxydiag runs [show RUN | rm RUN]``: list, inspect and remove stored runs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from proxydiag.cli._app import app, json_line, out
from proxydiag.cli._options import DEFAULT_STORE, LineFormat, LineFormatOpt, MaybeStoreOpt, StoreOpt
from proxydiag.cli.show import cell, show

if TYPE_CHECKING:
    from rich.table import Table

    from proxydiag.run import Run
    from proxydiag.store import RunStore

runs_app = typer.Typer(
    help="List stored runs; `runs show RUN` and `runs rm RUN`.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(runs_app, name="runs")


@runs_app.callback()
def runs_list(
    ctx: typer.Context,
    store: StoreOpt = DEFAULT_STORE,
    fmt: LineFormatOpt = LineFormat.text,
) -> None:
    """List the runs in the store (--format json: one object per run and line, by run id)."""
    ctx.obj = store
    if ctx.invoked_subcommand is not None:
        return
    from proxydiag.store import RunStore

    target = RunStore(store)
    if fmt == "json":
        _print_json(target)
        return
    frame = target.runs()
    if frame.height == 0:
        out.print(
            f"no runs in {store} (add some with `proxydiag ingest SOURCE --store {store}`)",
            markup=False,
        )
        return
    from rich.table import Table

    table = Table(
        title=cell(f"{frame.height} run(s) in {store} ({target.size_bytes() / 1e6:.1f} MB)"),
        title_justify="left",
    )
    shown = (
        "run",
        "name",
        "role",
        "group",
        "experts_kept",
        "format",
        "n_points",
        "n_metrics",
        "first_step",
        "last_step",
    )
    for column in shown:
        table.add_column(
            column,
            justify="right" if frame.schema[column].is_numeric() else "left",
            no_wrap=column == "run",
        )
    for row in frame.select(shown).iter_rows():
        table.add_row(*[cell(_number(v)) for v in row])
    show(table)


def _print_json(target: RunStore) -> None:
    """Every run as one JSON line (``proxydiag/schemas/run.schema.json``), by run id."""
    from proxydiag.fleet.index import run_index

    names = {"run": "id", "n_points": "points", "n_metrics": "metrics"}
    listed = ("run", "name", "role", "group", "n_points", "n_metrics", "source")
    for row in run_index(target).select(listed).iter_rows(named=True):
        json_line(json.dumps({names.get(k, k): v for k, v in row.items()}))


def _number(value: object) -> object:
    """Integers with thousands separators; a whole float (``experts_kept`` is stored as a
    float, so 64 reads back as 64.0) as an integer.

    >>> _number(64.0), _number(0.25), _number(12345), _number(float("nan")), _number("r1")
    ('64', 0.25, '12,345', nan, 'r1')
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else value


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="run id or unique name")],
    store: MaybeStoreOpt = None,
) -> None:
    """Attributes, the metric mapping used, events, and per-metric counts of one run."""
    from proxydiag.store import RunStore

    found = RunStore(store or ctx.obj or DEFAULT_STORE).get(run)
    out.print(f"run {found.id}  ({found.name})", markup=False)
    for key, value in sorted(found.attrs.items()):
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out.print(f"  {key}: {text}", markup=False)
    show(_metrics_table(found))
    if found.events:
        out.print(f"events ({len(found.events)}):")
        for event in found.events:
            at = f" at step {event.onset_step}" if event.onset_step is not None else ""
            out.print(f"  {event.kind}{at}: {event.evidence}", markup=False)


@runs_app.command("rm")
def runs_rm(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="run id or unique name")],
    store: MaybeStoreOpt = None,
) -> None:
    """Remove a run (its Parquet file, catalog row and diagnosis)."""
    from proxydiag.store import RunStore

    rid = RunStore(store or ctx.obj or DEFAULT_STORE).remove(run)
    out.print(f"removed {rid}", markup=False)


def _metrics_table(run: Run) -> Table:
    import polars as pl

    """metric, the source key used (canonical -> key), points, non-finite, first/last step."""
    stats = (
        run.frame.group_by("metric", "key")
        .agg(
            pl.len().alias("points"),
            (~pl.col("value").is_finite()).sum().alias("nonfinite"),
            pl.col("step").min().alias("first"),
            pl.col("step").max().alias("last"),
        )
        .sort("metric")
    )
    from rich.table import Table

    table = Table(title="metrics (canonical ← key as logged)", title_justify="left")
    for column in ("metric", "key", "points", "non-finite", "first step", "last step"):
        table.add_column(column, justify="left" if column in ("metric", "key") else "right")
    for metric, key, points, nonfinite, first, last in stats.iter_rows():
        mapped = "canonical" if run.mapping.get(metric) == key else "raw"
        table.add_row(
            cell(metric if mapped == "canonical" else f"{metric} (raw)"),
            cell(key),
            f"{points:,}",
            str(nonfinite),
            str(first),
            str(last),
        )
    return table
