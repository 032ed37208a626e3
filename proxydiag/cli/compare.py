"""``proxydiag compare --full SOURCE [--full ...] --proxy SOURCE``: proxy fidelity; with
``--store DIR [--group G]``, every stored proxy against its group's full runs (JSON Lines)."""

from __future__ import annotations

import json

import typer

from proxydiag.cli._app import app, out
from proxydiag.cli._fleet_results import stored_comparisons
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    Align,
    AlignOpt,
    ConfigOpt,
    Destination,
    FailOnOpt,
    Fleet,
    ForceOpt,
    FullOpt,
    GroupOpt,
    ProxyOpt,
    TextFormat,
    TextFormatOpt,
)
from proxydiag.cli._results import fail_classes, keep_comparison, load, load_one


@command(app)
def compare(
    full: FullOpt = None,
    proxy: ProxyOpt = None,
    align: AlignOpt = Align.step,
    fmt: TextFormatOpt = TextFormat.text,
    fail_on: FailOnOpt = None,
    config: ConfigOpt = None,
    to: Destination = Destination(),
    group: GroupOpt = None,
    fleet: Fleet = Fleet(),
    force: ForceOpt = False,
) -> None:
    """Score how faithfully a proxy reproduced the full run's dynamics and fault.

    With ``--store DIR`` and no ``--full``/``--proxy``: every stored proxy against its group's
    full runs (``--group G``: that group's proxies only), one JSON object per line (a
    comparison already kept for the same runs, configuration and proxydiag version is reused
    unless ``--force``).
    """
    from proxydiag.pipeline import Analysis, Settings
    from proxydiag.report.comparison import markdown, text

    settings = Settings.load(config)
    failing = fail_classes(fail_on, labels=False, verdicts=True)
    if not full and proxy is None and to.store is not None:
        if to.mlflow:
            raise typer.BadParameter(
                "comparing a store keeps results there; `proxydiag mlflow sync` logs them to MLflow"
            )
        stored_comparisons(
            to.store,
            pool=fleet.executor(),
            group=group,
            align=align,
            config=settings,
            force=force,
            failing=failing,
        ).finish()
        return
    if not full or proxy is None or group is not None:
        raise typer.BadParameter(
            "give --full SOURCE... --proxy SOURCE, or --store DIR "
            "[--group G] for every stored proxy"
        )
    fulls = [run for source in full for run in load(source, to.store)]
    proxies = [load_one(proxy, to.store)]
    cfg = settings.compare
    # diagnosed once, with the file's detector settings: the comparison and the report logged
    # to MLflow both use them
    analysis = Analysis(settings)
    result = analysis.compare(fulls, proxies[0], align=align)
    diagnoses = [analysis.diagnose(run) for run in [*fulls, proxies[0]]]
    if fmt == "json":
        out.print(json.dumps(result.to_dict()), markup=False, soft_wrap=True)
    else:
        out.print(markdown(result, cfg) if fmt == "markdown" else text(result, cfg), markup=False)
    keep_comparison(
        result,
        fulls,
        proxies[0],
        diagnoses=diagnoses,
        to=to,
    )
    if result.verdict in failing:
        raise typer.Exit(1)
