"""How small may a proxy be: the smallest proxy faithful in every phase, per group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from _fidelity_runs import compare_healthy, curves

import proxydiag
from proxydiag.evaluate.compare import PairResult, score
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.recommend import ProxyCost, recommend
from proxydiag.frame import raw
from proxydiag.report._fleet import Fleet
from proxydiag.report.dashboard import recommended_table
from proxydiag.report.recommend import lines, store_recommendations
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.store import RunStore


def level(proxy: str, verdict: str, *phases: tuple[str, str]) -> dict[str, Any]:
    return {
        "proxy_run": proxy,
        "fidelity": 0.9,
        "verdict": verdict,
        "phases": [{"name": n, "verdict": v, "ci": [0.8, 0.95]} for n, v in phases],
    }


COSTS = {
    p: ProxyCost(experts_kept=k, experts_total=64, cost_per_step=c)
    for p, k, c in (("e32", 32, 0.47), ("e16", 16, 0.22), ("e8", 8, 0.11))
}


def test_the_smallest_level_faithful_in_every_phase_is_recommended() -> None:
    rec = recommend(
        [
            level("e32", "faithful", ("pre_fault", "faithful"), ("fault", "faithful")),
            level("e16", "faithful", ("pre_fault", "faithful"), ("fault", "faithful")),
            level("e8", "partial", ("pre_fault", "partial"), ("fault", "faithful")),
        ],
        costs=COSTS,
        group="g",
    )
    assert [lv.proxy_run for lv in rec.levels] == ["e8", "e16", "e32"]
    assert rec.recommended is not None and rec.recommended.proxy_run == "e16"
    assert rec.recommended.kept_fraction == 0.25 and rec.recommended.saving == 0.78
    assert "e8" in lines(rec)[1] and "pre_fault partial" in lines(rec)[1]


def test_an_undecidable_phase_is_not_faithful_and_none_may_be_recommended() -> None:
    rec = recommend(
        [level("e32", "faithful", ("pre_fault", "undecidable"), ("fault", "faithful"))], costs=COSTS
    )
    assert rec.recommended is None and "pre_fault undecidable" in rec.reason


def test_the_saving_falls_back_to_the_kept_fraction() -> None:
    rec = recommend(
        [level("p", "faithful", ("whole", "faithful"))],
        costs={"p": ProxyCost(experts_kept=2, experts_total=8)},
    )
    assert rec.recommended is not None and rec.recommended.saving == 0.75
    assert "experts kept fraction" in rec.recommended.saving_basis
    assert proxydiag.recommend is recommend


def _run(name: str, role: str, kept: int, seed: int) -> Run:
    data = curves(300, seed=seed)
    n = 300
    keys = [k for k in data for _ in range(n)]
    frame = raw(np.tile(np.arange(n), len(data)), keys, np.concatenate(list(data.values())))
    return build_run(
        frame,
        name=name,
        source=f"mem://{name}",
        fmt="test",
        attrs={
            "role": role,
            "group": "g",
            "experts_kept": kept,
            "experts_total": 8,
            "cost_per_step": kept / 8,
        },
    )


def test_store_recommendations_and_the_dashboard_row(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    fulls = [_run(f"full{s}", "full", 8, s) for s in range(2)]
    proxies = [_run(f"p{k}", "proxy", k, 10 + k) for k in (4, 2)]
    for run in [*fulls, *proxies]:
        store.put(run)
    for proxy in proxies:
        store.put_comparison(compare_healthy(fulls, proxy, config=FidelityConfig(n_boot=50)))
    assert store.runs()["experts_total"].to_list() == [8.0] * 4
    rec = store_recommendations(store)["g"]
    assert rec.recommended is not None and rec.recommended.kept_fraction == 0.25
    html = recommended_table(Fleet(pl.DataFrame(), pl.DataFrame(), recommendations=(rec,)))
    assert "Recommended proxy per group" in html and "25.0%" in html


def test_bench_scores_each_labelled_phase() -> None:
    pairs = [
        PairResult(
            "a",
            "",
            True,
            False,
            0.9,
            "faithful",
            (),
            {"pre_fault": "faithful", "fault": "faithful"},
            {"pre_fault": True, "fault": True},
        ),
        PairResult(
            "b",
            "dynamics",
            False,
            False,
            0.8,
            "partial",
            (),
            {"pre_fault": "faithful", "fault": "faithful"},
            {"pre_fault": False, "fault": True},
        ),
        PairResult(
            "c",
            "",
            True,
            False,
            0.9,
            "faithful",
            (),
            {"whole": "undecidable"},
            {"whole": True, "pre_fault": True},
        ),
    ]
    s = score(pairs)
    assert s.per_phase["pre_fault"] == {"n": 2, "correct": 1, "accuracy": 0.5}
    assert s.per_phase["fault"]["accuracy"] == 1.0
    assert s.per_phase["whole"] == {"n": 1, "correct": 0, "accuracy": 0.0}
