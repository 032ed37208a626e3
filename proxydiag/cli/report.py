"""``proxydiag report``: a self-contained HTML (or Markdown/JSON) post-run report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from proxydiag.cli._app import app, err, out
from proxydiag.cli._fleet_results import group_results
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    DEFAULT_STORE,
    AliasesOpt,
    Align,
    AlignOpt,
    ConfigOpt,
    FailOnOpt,
    Fleet,
    FullOpt,
    GroupOpt,
    LogToMlflowOpt,
    MlflowExperimentOpt,
    OutputOpt,
    ProxyOpt,
    ReportFormat,
    ReportFormatOpt,
    StoreOpt,
    TrackingOpt,
)
from proxydiag.cli._results import fail_classes, load, load_one
from proxydiag.errors import AnalysisError

if TYPE_CHECKING:
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison
    from proxydiag.report.content import ReportContent
    from proxydiag.report.jobs import Job
    from proxydiag.run import Run


def _load(sources: list[str], *, store: Path, aliases: Path | None) -> list[Run]:
    return [run for source in sources for run in load(source, store, aliases)]


def _jobs(
    sources: list[str],
    full: list[str],
    proxy: str | None,
    group: str | None,
    *,
    store: Path,
    output: Path,
    aliases: Path | None,
) -> list[Job]:
    from proxydiag.report.jobs import Job, comparison_jobs, group_runs

    modes = sum([bool(sources), bool(full or proxy), group is not None])
    if modes != 1:
        raise AnalysisError(
            "give SOURCE..., or --full SOURCE... --proxy SOURCE, "
            "or --store DIR --group NAME (exactly one of them)"
        )
    if group is not None:
        fulls, proxies = group_runs(store, group)
        return comparison_jobs(output, full=fulls, proxies=proxies)
    if sources:
        return [Job(output, runs=tuple(_load(sources, store=store, aliases=aliases)))]
    if not full or proxy is None:
        raise AnalysisError("a comparison report needs --full SOURCE and --proxy SOURCE")
    proxies = [load_one(proxy, store, aliases)]
    return comparison_jobs(output, full=_load(full, store=store, aliases=aliases), proxies=proxies)


def _log_to_mlflow(
    content: ReportContent,
    html: str,
    *,
    tracking_uri: str | None,
    experiment: str | None,
    logged: set[str],
    store: Path,
) -> None:
    """Log the report's results; a diagnosis already logged by an earlier report of the
    group (its full runs) is not logged again (``logged`` holds those run ids). With a store
    at ``store`` the results are kept there first (a server that is down loses nothing)."""
    from proxydiag.mlflow.sink import log_comparison, log_diagnosis
    from proxydiag.store import RunStore

    kept = RunStore(store) if store.is_dir() else None
    for run in content.drawn_runs:
        d = content.diagnoses.get(run.id)
        if d is not None and run.id not in logged:
            logged.add(run.id)
            log_diagnosis(
                d,
                run,
                report_html=html,
                tracking_uri=tracking_uri,
                experiment=experiment,
                store=kept,
            )
    if content.comparison is not None and content.proxy is not None:
        log_comparison(
            content.comparison,
            content.proxy,
            list(content.full),
            report_html=html,
            tracking_uri=tracking_uri,
            experiment=experiment,
            store=kept,
        )


def _print_recommendation(
    store: Path, group: str, compared: list[Comparison], *, to_stderr: bool
) -> None:
    """How small may a proxy be: the group's smallest proxy faithful in every phase."""
    from proxydiag.report.recommend import group_recommendation, lines
    from proxydiag.store import RunStore

    rows = RunStore(store).runs().to_dicts()
    rec = group_recommendation(rows, [c.to_dict() for c in compared], group=group)
    console = err if to_stderr else out  # with -o - stdout carries the document
    for line in lines(rec):
        console.print(line, markup=False)


@command(app)
def report(
    sources: Annotated[list[str] | None, typer.Argument(help="runs to diagnose and show")] = None,
    output: OutputOpt = Path("report.html"),
    full: FullOpt = None,
    proxy: ProxyOpt = None,
    group: GroupOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    fmt: ReportFormatOpt = ReportFormat.html,
    align: AlignOpt = Align.step,
    fail_on: FailOnOpt = None,
    log_to_mlflow: LogToMlflowOpt = False,
    mlflow_experiment: MlflowExperimentOpt = None,
    tracking_uri: TrackingOpt = None,
    aliases: AliasesOpt = None,
    config: ConfigOpt = None,
    fleet: Fleet = Fleet(),
) -> None:
    """Write a post-run report: verdict, labels, timeline, metric panels, fidelity, evidence.

    --output is the file written ('-' for stdout); with --group G (a group of --store), one
    report per proxy. With --log-to-mlflow the results and the HTML report go to MLflow too.
    """
    from proxydiag.pipeline import Settings
    from proxydiag.report.api import render, resolve

    gate = fail_classes(fail_on, labels=True, verdicts=True)
    settings = Settings.load(config)
    matched: list[str] = []
    known: dict[str, Diagnosis] = {}  # a group's full runs are diagnosed once, not per proxy
    logged: set[str] = set()  # ... and logged to MLflow once
    compared: list[Comparison] = []  # a group's proxies: which is the smallest faithful one
    pool = fleet.executor()
    jobs = _jobs(
        list(sources or []),
        list(full or []),
        proxy,
        group,
        store=store,
        output=output,
        aliases=aliases,
    )
    made: dict[str, Comparison] = {}
    if group is not None and pool.name != "serial":  # the group's analyses as work items
        found, made = group_results(jobs, store=store, pool=pool, align=align, settings=settings)
        known.update(found)
    for job in jobs:
        ids = {r.id for r in job.every}
        content = resolve(
            runs=job.runs,
            full=job.full,
            proxy=job.proxy,
            align=align,
            diagnoses={rid: d for rid, d in known.items() if rid in ids},
            comparison=made.get(job.proxy.id) if job.proxy is not None else None,
            settings=settings,
        )
        known.update(content.diagnoses)
        text = render(content, fmt=fmt)
        if str(job.output) == "-":  # e.g. Markdown straight into a PR comment
            out.print(text, markup=False, end="")
        else:
            job.output.parent.mkdir(parents=True, exist_ok=True)
            job.output.write_text(text, encoding="utf-8")
            out.print(str(job.output), markup=False)
        if log_to_mlflow:
            html = text if fmt == "html" else render(content, fmt="html")
            _log_to_mlflow(
                content,
                html,
                tracking_uri=tracking_uri,
                experiment=mlflow_experiment,
                logged=logged,
                store=store,
            )
        matched += [
            f"{name}: {d.label}" for name, d in content.named_diagnoses() if d.label in gate
        ]
        c = content.comparison
        if c is not None and c.verdict in gate:
            matched.append(f"{content.proxy.name if content.proxy else 'proxy'}: {c.verdict}")
        if c is not None:
            compared.append(c)
    if group is not None and compared:
        _print_recommendation(store, group, compared, to_stderr=str(output) == "-")
    if matched:
        # with -o - stdout carries the document (a PR comment, say): the gate line stays out of it
        console = err if str(output) == "-" else out
        console.print(f"--fail-on matched: {'; '.join(matched)}", markup=False)
        raise typer.Exit(1)
