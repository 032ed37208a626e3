from __future__ import annotations

import math

import polars as pl

import proxydiag
from proxydiag.frame import SCHEMA, raw
from proxydiag.run.build import build_run


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


def test_frame_order_does_not_depend_on_the_readers_row_order() -> None:
    # contiguous blocks (a wide table unpivoted column by column) and interleaved rows (an
    # event file, step by step) of the same points give the same canonical frame
    steps = [1, 2, 3]
    blocks = raw(
        steps * 3,
        ["zeta"] * 3 + ["actor/grad_norm"] * 3 + ["alpha"] * 3,
        [1.0, 2, 3, 4, 5, 6, 7, 8, 9],
    )
    interleaved = raw(
        [s for s in steps for _ in range(3)],
        ["zeta", "actor/grad_norm", "alpha"] * 3,
        [1.0, 4, 7, 2, 5, 8, 3, 6, 9],
    )
    a = build_run(blocks, name="r", source="mem", fmt="test").frame
    b = build_run(interleaved, name="r", source="mem", fmt="test").frame
    assert a.equals(b)
    assert a["metric"].to_list() == ["alpha"] * 3 + ["grad_norm"] * 3 + ["zeta"] * 3
    assert a["step"].to_list() == steps * 3
