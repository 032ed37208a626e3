"""What ``diagnose``, ``compare`` and ``report`` share: result options, ``--fail-on``, keeping a
result.

A result is kept in the store first (nothing is lost if MLflow is down), then logged to MLflow.
With ``--log-to-mlflow`` the MLflow sink does both (it stores, logs, then marks the result
synced), so the result is stored exactly once either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from proxydiag.cli._app import err
from proxydiag.cli._options import Destination
from proxydiag.errors import ProxydiagError

if TYPE_CHECKING:
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison
    from proxydiag.run import Run
    from proxydiag.store import RunStore

#: a verdict given to ``--fail-on`` stands for itself or worse
VERDICT_OR_WORSE = {"unfaithful": ("unfaithful",), "partial": ("partial", "unfaithful")}


def fail_classes(fail_on: str | None, *, labels: bool, verdicts: bool) -> frozenset[str]:
    """The labels and verdicts that make a command exit 1, from ``--fail-on CLASS[,CLASS]``:
    failure labels (``labels``) and proxy verdicts (``verdicts``), ``partial`` meaning
    partial or worse in every command. An unknown class is a usage error (exit 2).

    >>> sorted(fail_classes("partial,loss_divergence", labels=True, verdicts=True))
    ['loss_divergence', 'partial', 'unfaithful']
    """
    from proxydiag.diagnose.result import LABELS

    if fail_on is None:
        return frozenset()
    asked = {c.strip() for c in fail_on.split(",") if c.strip()}
    known = [*(LABELS if labels else ()), *(VERDICT_OR_WORSE if verdicts else ())]
    unknown = sorted(asked - set(known))
    if unknown or not asked:
        raise typer.BadParameter(
            f"--fail-on {fail_on!r}: unknown class {', '.join(unknown) or '(none)'}; "
            f"use one or more of {', '.join(known)}"
        )
    return frozenset(c for a in asked for c in VERDICT_OR_WORSE.get(a, (a,)))


def load(source: str, store: Path | None, aliases: Path | None = None) -> list[Run]:
    """The runs of a CLI SOURCE (path, URI, or run id in ``store``)."""
    from proxydiag.cli.sources import load as load_source

    return load_source(source, store=store, aliases=aliases)


def load_one(source: str, store: Path | None, aliases: Path | None = None) -> Run:
    """The one run of a CLI SOURCE; a folder of several fails before any is read."""
    from proxydiag.cli.sources import load_one as load_source

    return load_source(source, store=store, aliases=aliases)


def keep_diagnosis(d: Diagnosis, run: Run, *, to: Destination) -> None:
    """Store ``d`` and/or log it to ``run``'s MLflow run."""
    _keep(
        lambda s: s.put_diagnosis(d),
        lambda sink, **where: sink.log_diagnosis(d, run, **where),
        {"runs": [run], "diagnoses": [d]},
        to=to,
    )


def keep_comparison(
    c: Comparison,
    fulls: list[Run],
    proxy: Run,
    *,
    to: Destination,
    diagnoses: Sequence[Diagnosis] | None = None,
) -> None:
    """Store ``c`` and/or log it to the proxy's MLflow run (with its report, which shows
    ``diagnoses`` when given instead of diagnosing the runs again)."""
    _keep(
        lambda s: s.put_comparison(c),
        lambda sink, **where: sink.log_comparison(c, proxy, fulls, **where),
        {"full": fulls, "proxy": proxy, "comparison": c, "diagnoses": diagnoses},
        to=to,
    )


def _keep(
    put: Callable[[RunStore], object],
    log: Callable[..., str],
    report: dict[str, Any],
    *,
    to: Destination,
) -> None:
    """``put`` the result in the store; or, with ``--log-to-mlflow``, ``log(sink, ...)`` it
    with the MLflow sink (:mod:`proxydiag.mlflow.sink`), its HTML report made of ``report``."""
    run_store = None
    if to.store is not None:
        from proxydiag.store import RunStore

        run_store = RunStore(to.store)
    if not to.mlflow:
        if run_store is not None:
            put(run_store)
        return
    from proxydiag.mlflow import sink

    mlflow_id = log(  # the sink stores first, then logs, then marks synced
        sink,
        report_html=_report_html(report),
        tracking_uri=to.tracking_uri,
        experiment=to.experiment,
        store=run_store,
    )
    err.print(f"logged to MLflow run {mlflow_id}", markup=False)


def _report_html(content: dict[str, Any]) -> str | None:
    """The HTML report for the MLflow artifact (None when it cannot be made)."""
    from proxydiag.report.api import report

    try:
        return report(**content, fmt="html")
    except ProxydiagError:
        return None
