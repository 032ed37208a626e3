"""``proxydiag bench diagnose|compare DIR``: score the analyses against a labelled corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from proxydiag.cli._app import out, sub_app
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    ConfigOpt,
    EveryOpt,
    Fleet,
    LineFormat,
    LineFormatOpt,
    OracleOpt,
    TextFormat,
    TextFormatOpt,
)

bench_app = sub_app("bench", "Score diagnose/compare against a labelled corpus (labels.json).")


@command(bench_app, "diagnose")
def bench_diagnose(
    corpus: Annotated[Path, typer.Argument(help="folder with labels.json")],
    config: ConfigOpt = None,
    fmt: TextFormatOpt = TextFormat.text,
    fleet: Fleet = Fleet(),
) -> None:
    """Per-class precision/recall, macro-F1 and onset error of `diagnose` on a corpus."""
    from proxydiag.evaluate.diagnose import render, score

    result = score(corpus, config=config, executor=fleet.executor())
    if fmt == "json":
        out.print(json.dumps(result.to_dict()), markup=False)
    else:
        out.print(render(result, markdown=fmt == "markdown"), markup=False)


@command(bench_app, "compare")
def bench_compare(
    corpus: Annotated[Path, typer.Argument(help="folder with labels.json (with pairs)")],
    config: ConfigOpt = None,
    fmt: TextFormatOpt = TextFormat.text,
    fleet: Fleet = Fleet(),
) -> None:
    """AUC of fidelity, verdict accuracy and seed-pair faithfulness of `compare` on a corpus."""
    from proxydiag.evaluate.compare import evaluate, render, score

    result = score(evaluate(corpus, config=config, executor=fleet.executor()))
    if fmt == "json":
        out.print_json(json.dumps(result.to_dict()))
    else:
        out.print(render(result, markdown=fmt == "markdown"), markup=False)


@command(bench_app, "watch")
def bench_watch(
    corpus: Annotated[Path, typer.Argument(help="folder with labels.json")],
    every: EveryOpt = 10,
    oracle: OracleOpt = True,
    fmt: LineFormatOpt = LineFormat.text,
    fleet: Fleet = Fleet(),
) -> None:
    """Detection delays, misses, false alerts and cost of `watch --replay` on a corpus."""
    from proxydiag.evaluate.watch import score, text

    summary = score(corpus, every=every, oracle=oracle, executor=fleet.executor())
    if fmt == "json":
        out.print(json.dumps(summary), markup=False, soft_wrap=True, highlight=False)
    else:
        out.print(text(summary), markup=False)
