from __future__ import annotations

import math

import polars as pl

import proxydiag
from proxydiag.frame import SCHEMA, raw
from proxydiag.ingest.build import build_run


def test_public_api_is_curated() -> None:
    for name in proxydiag.__all__:
        assert hasattr(proxydiag, name), name


def test_build_run_keeps_nonfinite_and_maps_aliases() -> None:
    frame = raw(
        [1, 2, 3, 1, 2, 3],
        ["actor/grad_norm"] * 3 + ["critic/score/mean"] * 3,
        [1.0, math.nan, math.inf, 0.1, -math.inf, 0.3],
    )
    run = build_run(frame, name="r", source="mem", fmt="test")
    assert dict(run.frame.schema) == SCHEMA
    assert run.mapping == {"grad_norm": "actor/grad_norm", "reward": "critic/score/mean"}
    _, g = run.series("grad_norm")
    assert g[0] == 1.0 and math.isnan(g[1]) and g[2] == math.inf
    _, r = run.series("reward")
    assert r[1] == -math.inf


def test_cumulative_counter_becomes_per_step() -> None:
    frame = raw([10, 20, 30], ["skipped_total"] * 3, [2.0, 5.0, 5.0])
    run = build_run(frame, name="r", source="mem", fmt="test")
    assert run.series("skipped_total")[1].tolist() == [2.0, 3.0, 0.0]


def test_restart_later_segment_wins() -> None:
    frame = raw([1, 2, 3, 4, 3, 4, 5], ["loss"] * 7, [1.0, 2, 3, 4, 30, 40, 50])
    run = build_run(frame, name="r", source="mem", fmt="test")
    steps, values = run.series("loss")
    assert steps.tolist() == [1, 2, 3, 4, 5]
    assert values.tolist() == [1.0, 2.0, 30.0, 40.0, 50.0]
    assert [e.kind for e in run.events] == ["restart"]
    assert run.frame.filter(pl.col("metric") == "loss").height == 5
