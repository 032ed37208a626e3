"""Shared fixtures. Real logs come from PROXYDIAG_REALRUNS (default ../shared/realruns)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings
from mlflow_fixtures import mlflow_server  # noqa: F401  (session fixture: a real MLflow server)

# `make test` replays the same property examples on every run, on CI and on a fresh machine
# alike (red must mean the change, not the draw); HYPOTHESIS_EXPLORE=1 draws new ones, and
# what fails is saved in .hypothesis/ (a new draw found the subnormal-spread overflow)
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", max_examples=500, print_blob=True)
settings.load_profile("explore" if os.environ.get("HYPOTHESIS_EXPLORE") else "ci")

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_RUNS = ROOT / "sample_runs"


def realruns_dir() -> Path:
    return Path(os.environ.get("PROXYDIAG_REALRUNS", ROOT.parent / "shared" / "realruns"))


@pytest.fixture(scope="session")
def realruns() -> Path:
    """The folder of real public training logs; skips visibly where it is absent."""
    path = realruns_dir()
    if not path.is_dir():
        pytest.skip(f"real logs not found at {path} (set PROXYDIAG_REALRUNS)")
    return path
