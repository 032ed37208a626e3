"""A run's Arrow IPC form: what a worker sends back is the run the driver gets."""

from __future__ import annotations

import math
import pickle

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from proxydiag.run.build import build_run
from proxydiag.run.ipc import RunBlob


def _run():
    rng = np.random.default_rng(7)
    steps = np.arange(200)
    loss = 2.0 - 0.003 * steps + rng.normal(0, 0.02, steps.size)
    grad = rng.lognormal(0, 0.3, steps.size)
    grad[[40, 41, 120]] = [math.inf, math.nan, -math.inf]
    # a restart from step 150 (a rollback): the reader records a restart event
    raw = pl.DataFrame(
        {
            "step": np.r_[steps, steps, np.arange(150, 200)],
            "key": ["train/loss"] * 200 + ["grad_norm"] * 200 + ["train/loss"] * 50,
            "value": np.r_[loss, grad, loss[150:] + 0.1],
        }
    )
    run = build_run(raw, name="r0", source="s/r0.csv", fmt="csv")
    run.attrs.update(role="proxy", group="g", seed=3, experts_kept=16, notes=None)
    return run


def test_round_trip_keeps_frame_metadata_and_events():
    run = _run()
    back = RunBlob.of(run).run()
    assert_frame_equal(back.frame, run.frame)
    assert (back.name, back.attrs, back.mapping) == (run.name, run.attrs, run.mapping)
    assert back.events == run.events
    assert any(e.kind == "restart" for e in back.events)
    values = back.frame.filter(pl.col("metric") == "grad_norm")["value"].to_numpy()
    assert np.isposinf(values).sum() == 1 and np.isneginf(values).sum() == 1
    assert np.isnan(values).sum() == 1


def test_pickles_as_bytes_between_processes():
    run = _run()
    blob = RunBlob.of(run)
    again = pickle.loads(pickle.dumps(blob))
    assert again == blob
    assert_frame_equal(again.run().frame, run.frame)
    assert len(blob.ipc) < run.frame.estimated_size()  # lz4-compressed Arrow, not a pickle
