"""Where things are, for tests at any depth under tests/."""

from __future__ import annotations

from pathlib import Path

#: the repository's root
ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SAMPLES = ROOT / "sample_runs"
SCHEMAS = ROOT / "proxydiag" / "schemas"
