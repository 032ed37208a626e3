"""A command imports what it runs: ``--help``, a command's help and a usage error load no
analysis library (time is measured in benchmarks/bench_cli.py, not here)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "polars",
    "numpy",
    "duckdb",
    "pandas",
    "scipy",
    "mlflow",
    "plotly",
    "pyarrow",
    "numba",
    "torch",
    "ray",
)

_PROBE = """
import json, sys
from proxydiag.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
loaded = {".".join(m.split(".")[:i + 1]) for m in sys.modules for i in range(m.count(".") + 1)}
heavy = sorted(loaded & set(json.loads(sys.argv[2])))
print(json.dumps(heavy), file=sys.__stderr__)
"""


def _loaded(argv: list[str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return list(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["diagnose", "--help"],
        ["watch", "--help"],
        ["diagnose", "x.jsonl", "--format", "nope"],
        ["compare", "--align", "nope"],
        ["version"],
    ],
)
def test_help_and_usage_errors_load_no_analysis_library(argv: list[str]) -> None:
    assert _loaded(argv) == []


#: what ``diagnose`` of a JSONL run needs none of: the store's DuckDB, the report's plotly, the
#: fidelity's scipy, MLflow, Parquet's pyarrow, the MLflow file store's YAML, pydantic (typer
#: 0.2x coerces through it; ``cli/_coerce.py`` keeps plain values off it), click (vendored)
DIAGNOSE_UNUSED = (
    *(m for m in HEAVY if m not in ("polars", "numpy")),
    "pydantic",
    "yaml",
    *(("click",) if importlib.util.find_spec("typer._click") else ()),
    "proxydiag.store",
    "proxydiag.fidelity.tests",
    "proxydiag.report.html",
)


def _jsonl_run(path: Path, steps: int) -> Path:
    """A small run as trainers log it: one JSON record a step, a few metrics."""
    with path.open("w", encoding="utf-8") as f:
        for step in range(steps):
            loss = 2.0 - step / steps + 0.01 * math.sin(step)
            record = {"step": step, "loss": loss, "grad_norm": 1.0 + 0.1 * math.cos(step)}
            f.write(json.dumps({**record, "lr": 1e-5, "reward": step / steps}) + "\n")
    return path


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_diagnose_of_a_small_file_loads_only_what_it_runs(tmp_path: Path, fmt: str) -> None:
    run = _jsonl_run(tmp_path / "run.jsonl", 400)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _PROBE,
            json.dumps(["diagnose", str(run), "-f", fmt]),
            json.dumps(DIAGNOSE_UNUSED),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "healthy" in done.stdout  # it did diagnose
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []


def test_import_proxydiag_is_light_and_its_api_loads_on_use() -> None:
    code = (
        "import sys, proxydiag; light = 'polars' not in sys.modules;"
        "import proxydiag.diagnose.view;"  # a subpackage first: the name stays the function
        "print(light, callable(proxydiag.diagnose), callable(proxydiag.report),"
        " proxydiag.RunStore.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out == ["True", "True", "True", "RunStore"]


def test_a_result_renders_in_a_notebook_before_the_report_is_imported() -> None:
    code = (
        "import sys; from proxydiag.diagnose.result import Diagnosis;"
        "d = Diagnosis(source='s', run='r', label='healthy', onset_step=None, confidence=0.9,"
        " root_cause=None, events=(), hints=(), missing=(), metrics={}, first_step=0,"
        " last_step=9, summary='ok');"
        "print('proxydiag.report.notebook' in sys.modules, '<' in d._repr_html_())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out == ["False", "True"]
