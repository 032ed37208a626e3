"""``proxydiag diagnose SOURCE...`` (or ``--store DIR --all``): label each run with its failure
class, onset and evidence; ``--workers N`` or ``--ray`` spread the runs over processes or Ray.

Exit codes: 0 done; 1 when ``--fail-on`` matched a run's label; 2 bad input (one line).
"""

from __future__ import annotations

from typing import Annotated

import typer

from proxydiag.cli._app import app
from proxydiag.cli._fleet_results import existing, source_diagnoses, stored_diagnoses
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    AliasesOpt,
    AllRunsOpt,
    ConfigOpt,
    Destination,
    FailOnOpt,
    Fleet,
    ForceOpt,
    TextFormat,
    TextFormatOpt,
)
from proxydiag.cli._results import fail_classes


@command(app)
def diagnose(
    sources: Annotated[
        list[str] | None, typer.Argument(help="run paths, MLflow URIs, or run ids in --store")
    ] = None,
    fmt: TextFormatOpt = TextFormat.text,
    fail_on: FailOnOpt = None,
    config: ConfigOpt = None,
    aliases: AliasesOpt = None,
    to: Destination = Destination(),
    all_runs: AllRunsOpt = False,
    fleet: Fleet = Fleet(),
    force: ForceOpt = False,
) -> None:
    """Label each run healthy / gradient_overflow / loss_divergence / precision_fault.

    With ``--store DIR --all``, every stored run; a result already kept for the same run
    content, configuration and proxydiag version is reused unless ``--force``.
    """
    from proxydiag.pipeline import Settings

    failing = fail_classes(fail_on, labels=True, verdicts=False)
    cfg = Settings.load(config).diagnose
    pool = fleet.executor()
    if all_runs == bool(sources) or (all_runs and to.store is None):
        raise typer.BadParameter("give SOURCE..., or --store DIR --all (one of them)")
    if all_runs:
        if to.mlflow:
            raise typer.BadParameter(
                "--all keeps results in --store; `proxydiag mlflow sync` logs them to MLflow"
            )
        from proxydiag.fleet.analyse import diagnose_all

        assert to.store is not None
        results = diagnose_all(existing(to.store), executor=pool, config=cfg, force=force)
        stored_diagnoses(results, fmt=fmt, failing=failing).finish()
        return
    source_diagnoses(
        list(sources or []),
        pool=pool,
        config=cfg,
        store=to.store,
        aliases=aliases,
        to=to,
        fmt=fmt,
        failing=failing,
    ).finish()
