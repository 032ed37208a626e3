"""Hand-written console fixtures (tests/data/console/), one per line shape real users paste:
each is read with the right steps, and the end states of a loss scaler are overflow failures.

The fixtures were written fresh in the shape of each framework's output (its source names the
format), with invented numbers; none is copied from anyone's log.
"""

from __future__ import annotations

import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.ingest import detect, read_run
from proxydiag.run import Run
from tests._paths import TESTS

DATA = TESTS / "data" / "console"


def _series(run: Run, metric: str) -> tuple[list[int], list[float]]:
    s = run.frame.filter(pl.col("metric") == metric).sort("step")
    return s["step"].to_list(), s["value"].to_list()


@pytest.mark.parametrize(
    ("name", "metric", "steps", "source"),
    [
        # transformers >= 5: quoted values, tqdm redraws; the step is the tqdm counter
        ("hf5_quoted_tqdm.log", "loss", list(range(1, 41)), "tqdm"),
        # ms-swift: JSON lines, the step in "global_step/max_steps": "N/M"
        ("swift_logging.jsonl.log", "loss", list(range(1, 31)), "global_step/max_steps"),
        ("swift_console_dicts.log", "loss", list(range(5, 101, 5)), "global_step/max_steps"),
        # TRL PPO: no step key, the dict's own 'episode'
        ("trl_ppo_dicts.log", "kl", list(range(64, 961, 64)), "episode"),
    ],
)
def test_dict_lines_take_the_counter_that_is_there(
    name: str, metric: str, steps: list[int], source: str
) -> None:
    run = read_run(DATA / name)
    assert _series(run, metric)[0] == steps
    assert any(e.kind == "step_source" and source in e.evidence for e in run.events)


def test_quoted_nan_is_read_as_nan() -> None:
    steps, values = _series(read_run(DATA / "hf5_quoted_tqdm.log"), "grad_norm")
    assert [s for s, v in zip(steps, values, strict=True) if v != v] == [17, 18]


def test_minillm_pipe_lines_step_on_global_iter_and_keep_the_scale() -> None:
    run = read_run(DATA / "minillm_pipes.log")
    assert getattr(detect(DATA / "minillm_pipes.log"), "NAME", None) == "console"
    steps, scale = _series(run, "loss_scale")
    assert steps == list(range(1, 26)) and scale[0] == 2048.0 and scale[-1] == 512.0


@pytest.mark.parametrize("name", ["hf_notebook_table.log", "hf_notebook_table_tabs.log"])
def test_the_notebook_table_is_read(name: str) -> None:
    steps, values = _series(read_run(DATA / name), "loss")
    assert steps[:2] in ([10, 20], [5, 10]) and values[0] > values[-1]


def test_notebook_table_no_log_cells_are_no_points() -> None:
    steps, _ = _series(read_run(DATA / "hf_notebook_table.log"), "eval_loss")
    assert steps == [20, 30, 40, 50, 60]


def test_hf_deepspeed_overflows_take_the_tqdm_counter_on_their_line() -> None:
    """Seven OVERFLOW! lines after tqdm counters 376-388: seven steps, a scale down to 1."""
    run = read_run(DATA / "hf_deepspeed_tqdm_overflow.log")
    steps, scale = _series(run, "loss_scale")
    assert steps == [377, 378, 379, 381, 383, 386, 389] and scale[-1] == 1.0
    d = diagnose(run)
    assert d.label == "gradient_overflow" and 370 <= (d.onset_step or 0) <= 389


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ds_scale_reaches_zero.log", "loss_scale_minimum"),  # "reducing to 0"
        ("ds_scale_at_minimum.log", "loss_scale_minimum"),  # "already at minimum"
        ("megatron_overflows_then_traceback.log", "overflow_crash"),
    ],
)
def test_scaler_end_states_are_overflow_failures_even_in_a_short_log(name: str, kind: str) -> None:
    d = diagnose(read_run(DATA / name))
    assert d.label == "gradient_overflow" and d.root_cause is not None
    assert d.root_cause.kind == kind


def test_perplexity_nan_is_a_nonfinite_loss() -> None:
    d = diagnose(read_run(DATA / "perplexity_nan.log"))
    assert d.label == "gradient_overflow" and d.onset_step == 4
    assert "non-finite loss" in d.events[0].evidence


def test_a_short_window_blow_up_is_called_with_a_low_confidence() -> None:
    """lm loss 3.3 -> 7.6 while the grad norm goes x14 in six logged iterations."""
    d = diagnose(read_run(DATA / "megatron_short_blowup.log"))
    assert d.label == "loss_divergence" and 1201 <= (d.onset_step or 0) <= 1204
    assert d.confidence < 0.6 and "6 logged points" in d.events[0].evidence
