"""Lost master weights: a gradient norm that moves onto the bf16 grid and stays there is a
precision fault of its own kind, even with no mismatch metric; healthy fp32, fp16 and bf16
runs, console-rounded norms and clipped norms raise nothing."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import master_weights
from proxydiag.diagnose.view import view
from proxydiag.ingest import read_runs
from proxydiag.run import Run
from tests._paths import SAMPLES, SCHEMAS, TESTS


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to the nearest bf16 (ties to even), as a cast of an fp32 tensor does."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def to_fp32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def _run(series: dict[str, np.ndarray], steps: np.ndarray) -> Run:
    frames = [
        pl.DataFrame({"step": steps, "key": [k] * len(steps), "value": np.asarray(v, float)})
        for k, v in series.items()
    ]
    raw = pl.concat(frames).with_columns(pl.lit(None, dtype=pl.Float64).alias("wall_time"))
    return Run.from_raw(raw, name="m", source="<test>", fmt="test", attrs={})


def _norms(seed: int, n: int, level: float = 0.8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return level * np.exp(np.cumsum(rng.normal(0, 0.02, n)) + rng.normal(0, 0.15, n))


@pytest.mark.parametrize(
    ("n", "lost_at", "every", "key", "level"),
    [
        (400, 250, 1, "grad_norm", 0.8),  # HF Trainer
        (300, 120, 10, "actor/grad_norm", 3.0),  # veRL, logged every 10 steps
        (200, 150, 5, "train/grad_norm", 0.02),  # slime, small norms
    ],
)
def test_a_norm_that_moves_onto_the_bf16_grid_is_lost_master_weights(
    n: int, lost_at: int, every: int, key: str, level: float
) -> None:
    g = _norms(n, n, level)
    i = np.arange(n)
    logged = np.where(i < lost_at, to_fp32(g), to_bf16(g))
    steps = (i + 1) * every
    d = diagnose(_run({key: logged, "loss": 2 - i / 1e3}, steps))
    jsonschema.validate(d.to_dict(), json.loads((SCHEMAS / "diagnosis.schema.json").read_text()))
    assert d.label == "precision_fault"
    assert (d.precision_kind or {}).get("kind") == "lost_master_weights"
    assert d.onset_step is not None and abs(d.onset_step - (lost_at + 1) * every) <= every
    assert "mismatch_*" in d.missing  # told apart with no mismatch metric at all
    assert any("master weights" in h for h in d.hints)


def test_after_a_resume_that_dropped_the_master_weights() -> None:
    # 300 steps, a crash, a resume from the step-200 checkpoint that restored bf16 weights only
    g = _norms(5, 500)
    first = np.arange(1, 301)
    again = np.arange(201, 401)
    steps = np.r_[first, again]
    logged = np.r_[to_fp32(g[:300]), to_bf16(g[300:])]
    d = diagnose(_run({"grad_norm": logged}, steps))
    assert (d.label, (d.precision_kind or {}).get("kind")) == (
        "precision_fault",
        "lost_master_weights",
    )
    assert d.onset_step is not None and 195 <= d.onset_step <= 205


def _quiet(values: np.ndarray) -> bool:
    n = values.size
    rv = view(_run({"grad_norm": values}, np.arange(1, n + 1)))
    return master_weights.detect(rv, DiagnoseConfig()) == []


@pytest.mark.parametrize("seed", range(3))
def test_healthy_norms_are_quiet(seed: int) -> None:
    g = _norms(seed, 600)
    i = np.arange(600)
    assert _quiet(g)  # fp64 norms (a reduction in fp32 accumulated in fp64)
    assert _quiet(to_fp32(g))  # fp32 norms (TensorBoard stores fp32)
    assert _quiet(to_bf16(g))  # pure bf16 from the first step: nothing earlier to differ from
    # an fp16 norm after an fp32 one: a grid of 11 bits, not bf16's 8
    assert _quiet(np.where(i < 300, to_fp32(g), np.asarray(g, np.float16).astype(float)))
    # console logs rounded to 3 or 4 decimals (many short decimals are bf16 numbers)
    assert _quiet(np.round(g, 4)) and _quiet(np.round(g * 100, 0))
    # a norm that is clipped to 1.0 from some step on (post-clip logging)
    assert _quiet(np.where(i < 300, g, 1.0))


def test_the_grid_test_on_single_values() -> None:
    assert master_weights.on_bf16_grid(to_bf16(np.array([0.7, 3.3, 1e-20]))).all()
    assert not master_weights.on_bf16_grid(to_fp32(np.array([0.7, 3.3]))).any()
    states = master_weights.grid_states(np.array([0.5, to_bf16(np.array([0.7]))[0], 0.7, np.nan]))
    assert states.tolist() == [-1, 1, 0, -1]


@pytest.mark.parametrize("corpus", ["real", "samples"])
def test_real_and_sample_runs_stay_quiet(corpus: str) -> None:
    root: Path = TESTS / "data" / "real" if corpus == "real" else SAMPLES
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            for run in read_runs(d):
                if run.has("grad_norm"):
                    checked += 1
                    assert master_weights.detect(view(run), DiagnoseConfig()) == [], run.name
    assert checked >= 5


def test_a_few_points_before_are_enough_when_logged_sparsely() -> None:
    # logged every 10 steps, the master weights lost at step 70: six fp32 points before
    g = _norms(9, 40)
    i = np.arange(40)
    logged = np.where(i < 6, to_fp32(g), to_bf16(g))
    d = diagnose(_run({"grad_norm": logged}, (i + 1) * 10))
    assert (d.label, (d.precision_kind or {}).get("kind"), d.onset_step) == (
        "precision_fault",
        "lost_master_weights",
        70,
    )
