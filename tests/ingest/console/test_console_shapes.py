"""Lines of one shape read once: slicing every line by its shape's plan gives exactly what
the grammar reads line by line, on every console file the tests have (the trainer-style
fixtures, the sample runs, the real public logs) and on long logs made of their lines with
other digits."""

from __future__ import annotations

import random
import re
import warnings
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from proxydiag.ingest import console
from proxydiag.ingest.console import _shapes
from proxydiag.ingest.console.dialects import grammar
from tests._paths import SAMPLES, TESTS
from tests.conftest import realruns_dir

CONSOLE = TESTS / "data" / "console"


def _files() -> list[Path]:
    found = sorted(CONSOLE.rglob("*.log")) + sorted(SAMPLES.rglob("*.log"))
    real = realruns_dir()
    if real.is_dir():
        found += sorted(p for p in real.rglob("*") if p.suffix in {".log", ".out", ".txt"})
    return found


def _raw(path: Path, monkeypatch: pytest.MonkeyPatch, *, planned: bool) -> pl.DataFrame:
    with monkeypatch.context() as m:
        m.setattr(_shapes, "MIN_LINES", 0 if planned else 10**12)
        m.setattr(_shapes, "SHAPE_LINES", 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return console.parse(path).raw


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_every_shape_by_its_plan_reads_as_the_grammar_line_by_line(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every shape of the file gets a plan (or none) and is read by it."""
    assert_frame_equal(
        _raw(path, monkeypatch, planned=True), _raw(path, monkeypatch, planned=False)
    )


def _redigit(line: str, rng: random.Random) -> str:
    """``line`` with other digits (the same shape)."""
    return re.sub(r"[0-9]", lambda _: str(rng.randrange(10)), line)


@pytest.mark.parametrize(
    "style", sorted(p.stem for p in (CONSOLE / "styles").glob("*.log")), ids=str
)
def test_a_long_log_of_a_style_reads_as_line_by_line(
    style: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A style's lines again and again with other digits (steps counting up where a digit
    run is the step): the default plans (shapes seen on 16+ lines of a block) read what the
    grammar reads line by line."""
    rng = random.Random(style)
    lines = (CONSOLE / "styles" / f"{style}.log").read_text().splitlines()
    out = [_redigit(line, rng) for _ in range(40) for line in lines]
    path = tmp_path / f"{style}.log"
    path.write_text("\n".join(out) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        planned = console.parse(path).raw
        with monkeypatch.context() as m:
            m.setattr(_shapes, "MIN_LINES", 10**12)
            line_by_line = console.parse(path).raw
    assert_frame_equal(planned, line_by_line)


def test_a_plan_is_refused_when_the_step_is_computed_from_several_numbers() -> None:
    """mmengine's ``Epoch(train) [e][i/n]`` step is (e-1)*n+i: no one place holds it."""
    rep = (
        "2026/12/07 10:00:00 - mmengine - INFO - Epoch(train)  [2][ 10/500]  lr: 2.0e-05  "
        "loss: 1.2345"
    )
    read = lambda lines: grammar._facts(lines, epoch_base=1)  # noqa: E731
    assert _shapes.plan(rep, read) is None
    titan = (
        "[rank0]:[titan] 2026-12-07 10:00:00,123 - root - INFO - step:  12  loss:  2.8444  "
        "tps: 6,722  memory: 31.21GiB(40.11%)"
    )
    found = _shapes.plan(titan, read)
    assert found is not None
    assert (
        found.step is not None
        and titan[found.step.start : found.step.start + found.step.length] == "12"
    )
    assert [p.key for p in found.pairs] == ["loss", "tps", "memory"]
    assert [p.unit for p in found.pairs] == ["", "", "GiB"] and found.pairs[1].commas
