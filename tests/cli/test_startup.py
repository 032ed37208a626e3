"""A command imports what it runs: ``--help``, a command's help and a usage error load no
analysis library (time is measured in benchmarks/bench_cli.py, not here)."""

from __future__ import annotations

import json
import subprocess
import sys

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
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[2])))
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
