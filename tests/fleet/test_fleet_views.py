"""``report --group``, ``dashboard`` and ``bench diagnose|compare`` with ``--workers 2`` give
what they give in one process (their analyses become per-run and per-proxy work items)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet_helpers import FAST, GROUP, SAMPLE_RUNS, ingest_quietly, run_cli, sample_group

from proxydiag.fleet._local_pool import LocalPool
from proxydiag.report._fleet import load_fleet
from proxydiag.store import RunStore


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fast sample runs ingested (no results stored: the views analyse in memory)."""
    tmp = tmp_path_factory.mktemp("views")
    store = tmp / "store"
    ingest_quietly(sample_group(tmp), store)
    return store


def test_report_group_with_workers_is_the_one_process_report(
    stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written, printed = {}, {}
    for workers in ("1", "2"):
        out = tmp_path / workers / "report.json"
        code, said, _ = run_cli(
            [
                "report",
                "--store",
                str(stored),
                "--group",
                GROUP,
                "-f",
                "json",
                "-o",
                str(out),
                "--workers",
                workers,
            ],
            capsys,
        )
        paths = [line for line in said.splitlines() if line.endswith(".json")]
        assert code == 0 and len(paths) == 2  # one report per proxy, then the recommendation
        printed[workers] = [line.replace(str(tmp_path / workers), "") for line in said.splitlines()]
        written[workers] = {p.name: json.loads(p.read_text()) for p in out.parent.iterdir()}
    assert written["1"] == written["2"] and len(written["1"]) == 2
    assert printed["1"] == printed["2"]


def test_the_dashboards_fleet_with_workers_is_the_one_process_fleet(stored: Path) -> None:
    one = load_fleet(RunStore(stored))
    two = load_fleet(RunStore(stored), executor=LocalPool(workers=2))
    assert one.runs.equals(two.runs) and one.proxies.equals(two.proxies)
    assert one.proxies.height == 2 and one.runs["label"].null_count() == 0


def test_bench_with_workers_scores_as_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = json.loads((SAMPLE_RUNS / "labels.json").read_text())
    runs = {
        name: dict(entry, path=str(SAMPLE_RUNS / entry["path"]))
        for name, entry in labels["runs"].items()
        if name in FAST
    }
    fulls = [name for name in FAST if runs[name]["role"] == "full"]
    # each fast proxy against the fast full runs, with the truth of its labelled pair
    pairs = {
        name: dict(pair, full=fulls)
        for name, pair in labels["pairs"].items()
        if pair["proxy"] in FAST and runs[pair["proxy"]]["role"] == "proxy"
    }
    (tmp_path / "labels.json").write_text(json.dumps({"runs": runs, "pairs": pairs}))
    assert len(pairs) == 2
    for verb in ("diagnose", "compare"):
        args = ["bench", verb, str(tmp_path), "-f", "json"]
        one = run_cli(args, capsys)
        assert one[0] == 0 and one[:2] == run_cli([*args, "--workers", "2"], capsys)[:2], verb
    # watch's scores also hold its CPU cost per step, which no two runs share
    args = ["bench", "watch", str(tmp_path), "-f", "json", "--no-oracle"]
    watched = [run_cli([*args, "--workers", n], capsys) for n in ("1", "2")]
    assert [code for code, _, _ in watched] == [0, 0]
    scores = [_without_cost(json.loads(out)) for _, out, _ in watched]
    assert scores[0] == scores[1] and scores[0]["n_runs"] == 4  # type: ignore[index]


def _without_cost(value: object) -> object:
    """``value`` without its CPU-time keys (``..._ms_per_step...``), at any depth."""
    if isinstance(value, dict):
        return {k: _without_cost(v) for k, v in value.items() if "ms_per_step" not in k}
    if isinstance(value, list):
        return [_without_cost(v) for v in value]
    return value
