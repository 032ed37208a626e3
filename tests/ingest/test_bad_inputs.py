"""Issue 9's bad-input corpus through `proxydiag ingest`: a one-line error (exit 2) or a warning
plus exactly the intact data (exit 0) — never a traceback, a hang or a wrong number."""

from __future__ import annotations

import atexit
import collections
import importlib.util
import math
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from proxydiag.cli import main
from proxydiag.store import RunStore
from tests._paths import TESTS

sys.path.insert(0, str(TESTS / "corpus"))
from make_bad_inputs import Case, make

_ROOT = Path(tempfile.mkdtemp(prefix="proxydiag-bad-inputs-"))
atexit.register(shutil.rmtree, _ROOT, True)
CASES = make(_ROOT)
OUTCOMES: collections.Counter[str] = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def _count(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    detail = ", ".join(f"{n} {k}" for k, n in sorted(OUTCOMES.items()))
    line = f"bad inputs: {len(CASES)} cases: {detail}"
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n{line}")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _points(store: Path, *, column: str = "key") -> dict[str, list[tuple[int, float]]]:
    target = RunStore(store)
    frames = [target.get(rid).frame for rid in target.runs()["run"]]
    if not frames:
        return {}
    frame = pl.concat(frames).sort(column, "step")
    return {
        k: list(zip(g["step"].to_list(), g["value"].to_list(), strict=True))
        for (k,), g in frame.group_by(column, maintain_order=True)
    }


def _check_data(case: Case, got: dict[str, list[tuple[int, float]]]) -> None:
    for key, want in (case.expect or {}).items():
        have = got.get(key, [])
        if case.subset:  # damaged records may be gone, but what is there must be right
            truth = dict(want)
            assert all(s in truth and _same(v, truth[s]) for s, v in have), (key, have)
            assert len(have) >= case.min_points, (key, have)
        else:
            assert len(have) == len(want) and all(
                s1 == s2 and _same(v1, v2) for (s1, v1), (s2, v2) in zip(have, want, strict=True)
            ), (key, have, want)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec(case.reader) is None:
        OUTCOMES["skipped (reader not written yet)"] += 1
        pytest.skip(f"{case.reader} is not written yet")
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as info:
        main(["ingest", str(case.path), "--store", str(store)])
    code = info.value.code
    lines = capsys.readouterr().err.splitlines()
    assert code in (0, 2), lines
    assert all(line.startswith(("warning: ", "error: ")) for line in lines), lines
    errors = [line for line in lines if line.startswith("error: ")]
    if code == 2:
        OUTCOMES["exit 2 (one-line error)"] += 1
        assert case.outcome in ("error", "either"), f"expected data, got {errors}"
        assert len(errors) == 1 and str(case.path) in errors[0], lines
        assert case.message in errors[0]
        assert RunStore(store).runs().height == 0
        return
    OUTCOMES["exit 0 (warning + intact data)" if case.warn else "exit 0 (exact data)"] += 1
    assert case.outcome in ("data", "either"), f"expected an error, got exit 0 ({lines})"
    if case.warn:
        assert any(line.startswith("warning: ") and str(case.path) in line for line in lines), lines
    _check_data(case, _points(store, column="metric" if case.by_metric else "key"))
