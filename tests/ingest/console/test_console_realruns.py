"""The console reader on the real public logs under ../shared/realruns (values checked by hand
against the files with grep)."""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pytest

from proxydiag.ingest import ReadContext, console, detect, read_run
from proxydiag.run import Run

DSCHAT = "deepspeed_chat"
SFT = f"{DSCHAT}/step1_supervised_finetuning__opt-1.3b-globalBatchSize128.log"
RM = f"{DSCHAT}/step2_reward_model_finetuning__opt-350m_globalBatchSize-64.log"
DPO = f"{DSCHAT}/step2_dpo_finetuning__opt-350M_globalBatchSize-32.log"
PPO = f"{DSCHAT}/step3_rlhf_finetuning__actor_opt-1.3b_critic_opt-350m_globalBatchSize64.log"
LTD = f"{DSCHAT}/random_ltd__train_with_kernel__d0df7a8c.log"
TR8 = "bigscience/tr8-104B-wide__chronicle-excerpts.log"
TR8B = "bigscience/tr8b-104B__chronicle-excerpts.log"
TR11 = "bigscience/tr11-176B-ml__chronicle-excerpts.log"
TR1 = "bigscience/tr1-13B-base__chronicle-excerpts.log"
MEG = "bigscience/meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out"
HFDS = "bigscience/hf_ds_gpt2_base_n16-1832552.out"
ALL = (SFT, RM, DPO, PPO, LTD, TR8, TR8B, TR11, TR1, MEG, HFDS)


def _run(path: Path) -> Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return console.read(path, ReadContext())[0]


def _value(run: Run, metric: str, step: int) -> float:
    rows = run.frame.filter((pl.col("metric") == metric) & (pl.col("step") == step))
    assert rows.height == 1, f"{metric}@{step}: {rows.height} rows"
    return float(rows["value"][0])


@pytest.mark.parametrize("name", ALL)
def test_every_real_log_is_recognised_and_parses(realruns: Path, name: str) -> None:
    path = realruns / name
    assert console.can_read(path)
    run = _run(path)
    assert run.frame.height > 0
    assert run.attrs["format"] == "console"


def test_every_file_under_realruns_is_covered(realruns: Path) -> None:
    files = {str(p.relative_to(realruns)) for p in realruns.glob("*/*") if p.name != "NOTICE"}
    assert files == set(ALL)


def test_the_registry_picks_the_console_reader(realruns: Path) -> None:
    names = {name: getattr(detect(realruns / name), "NAME", None) for name in ALL}
    assert set(names.values()) == {"console"}, names


def test_read_run_detects_a_console_log(realruns: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = read_run(realruns / SFT)
    assert run.attrs["format"] == "console"


def test_sft_overflows_match_the_final_skipped_counter(realruns: Path) -> None:
    parsed = console.parse(realruns / SFT)
    run = _run(realruns / SFT)
    assert parsed.overflows.height == 139  # 139 OVERFLOW! lines
    assert parsed.attrs["skipped_counter_final"] == 139  # step=7360, skipped=139
    assert parsed.attrs["overflow_step_uncertainty"] == 10  # step= every 10 steps
    assert run.frame["step"].max() == 7360
    skipped = run.frame.filter(pl.col("metric") == "skipped")
    assert skipped["value"].sum() == 139
    assert run.frame.filter(pl.col("metric") == "skipped_total")["value"].sum() == 139
    assert not [e for e in run.events if e.kind == "skip_count_mismatch"]
    # the first 6 overflows come before step=10 (skipped=6): calibration 65536 -> 2048
    first = parsed.overflows.head(6)
    assert first["step"].to_list() == [10] * 6
    assert first["attempted"].to_list() == [65536.0, 65536.0, 32768.0, 16384.0, 8192.0, 4096.0]
    assert first["scale"].to_list() == [65536.0, 32768.0, 16384.0, 8192.0, 4096.0, 2048.0]
    assert _value(run, "skipped", 10) == 6
    assert _value(run, "loss_scale", 10) == 2048.0
    assert _value(run, "ds_loss_scale_attempted", 10) == 65536.0
    # the periodic growth probe: hysteresis at 65536, then 65536 -> 32768 before step=1430
    assert _value(run, "skipped", 1430) == 2
    assert _value(run, "loss_scale", 1430) == 32768.0
    assert _value(run, "perplexity", 0) == pytest.approx(4998.29638671875)  # key "ppl"


def test_reward_model_counts_rank_repeated_iteration_lines_once(realruns: Path) -> None:
    parsed = console.parse(realruns / RM)
    run = _run(realruns / RM)
    # 320 "Grad overflow on iteration N" lines = 16 ranks x 20 iterations
    assert parsed.attrs["overflow_family"] == "ds_iter"
    assert parsed.overflows.height == 20
    assert parsed.attrs["skipped_counter_final"] == 20
    assert parsed.overflows["step"].head(10).to_list() == list(range(1, 11))  # iterations 0..9
    assert [_value(run, "loss_scale", s) for s in (1, 2, 10)] == [32768.0, 16384.0, 64.0]
    # iterations 557 and 558 are steps 558 and 559: the counter goes 14 -> 16 by step=560
    assert parsed.overflows["step"].to_list()[13:17] == [487, 558, 559, 566]
    assert _value(run, "skipped", 559) == 1


def test_dpo_spliced_lines_do_not_lose_overflows(realruns: Path) -> None:
    parsed = console.parse(realruns / DPO)
    # only 19 "Overflow detected" lines survive the splicing, but 21 distinct iterations do
    assert parsed.overflows.height == 21
    assert parsed.attrs["skipped_counter_final"] == 21
    run = _run(realruns / DPO)
    assert not [e for e in run.events if e.kind == "restart"]


def test_ppo_actor_and_critic_are_kept_apart(realruns: Path) -> None:
    parsed = console.parse(realruns / PPO)
    run = _run(realruns / PPO)
    assert parsed.attrs["engines"] == 2
    assert parsed.overflows.height == 14  # 7 + 7
    assert parsed.attrs["skipped_counter_final"] == 14
    raw = run.frame.filter(pl.col("key").str.starts_with("ds_skipped"))
    at10 = dict(raw.filter(pl.col("step") == 10).select("key", "value").rows())
    assert at10 == {"ds_skipped": 4.0, "ds_skipped@engine1": 3.0}  # lines 54 and 56
    assert _value(run, "pg_loss", 0) == 0.2099609375
    assert _value(run, "cri_loss", 0) == 0.12042236328125
    assert _value(run, "reward", 0) == -0.67919921875  # the line after step 0
    assert _value(run, "reward", 1) == -0.0648193359375
    assert _value(run, "step_time", 0) == 7.99  # E2E latency=7.99s
    assert _value(run, "skipped", 0) == 2  # two hysteresis OVERFLOW! lines before step 0
    assert _value(run, "loss_scale", 1) == 32768.0
    assert run.frame.filter(pl.col("metric") == "pg_loss").height == 477


def test_tr8_104b_spike_values_and_restarts(realruns: Path) -> None:
    parsed = console.parse(realruns / TR8)
    raw = parsed.raw
    grad = dict(raw.filter(pl.col("key") == "grad norm").select("step", "value").rows())
    loss = dict(raw.filter(pl.col("key") == "lm loss").select("step", "value").rows())
    assert (grad[11446], grad[11447]) == (12952.562, 262623.331)  # 12.9k -> 262.6k
    assert (loss[11447], loss[11448]) == (3.114286, 7.71234)  # 3.11 -> 7.71
    assert loss[9026] == 7.02458 and 9027 not in loss  # NaN loss: Megatron prints none
    run = _run(realruns / TR8)
    restarts = [e.onset_step for e in run.events if e.kind == "restart"]
    assert 6900 in restarts and 8738 in restarts
    # after a restart the later segment wins: 11446-11448 are superseded by 8738...
    assert run.frame.filter(pl.col("step") >= 11446).height == 0


def test_tr8b_overflows_beat_megatrons_zero_counter(realruns: Path) -> None:
    run = _run(realruns / TR8B)
    skipped = run.frame.filter(pl.col("metric") == "skipped")
    assert skipped["key"].unique().to_list() == ["ds_overflow"]
    assert skipped["step"].to_list() == [17062, 17063, 17064, 17065, 17067, 17068]
    assert _value(run, "loss_scale", 17064) == 262144.0  # Megatron's own "loss scale"
    assert _value(run, "ds_loss_scale", 17068) == 32768.0
    assert _value(run, "ds_loss_scale_attempted", 17068) == 65536.0


def test_bigscience_launcher_prefix_and_seconds(realruns: Path) -> None:
    run = _run(realruns / TR11)
    assert _value(run, "grad_norm", 31219) == 960.351  # "[default7]: iteration 31219/..."
    assert _value(run, "step_time", 31219) == 106.36  # elapsed time per iteration (s)
    assert _value(run, "tokens", 45000) == 155652554752
    duplicates = [e for e in run.events if e.kind == "duplicate_steps"]
    assert duplicates  # six experiments all logged "iteration 2"


def test_megatron_2021_out_file(realruns: Path) -> None:
    run = _run(realruns / MEG)
    assert _value(run, "skipped", 10) == 10  # number of skipped iterations:  10
    assert _value(run, "loss_scale", 10) == 8388608.0
    assert run.frame.filter((pl.col("metric") == "loss") & (pl.col("step") == 10)).height == 0
    assert _value(run, "lm loss validation", 100) == 8.017406
    assert _value(run, "lm loss validation ppl", 200) == 1785.236


def test_hf_deepspeed_out_file(realruns: Path) -> None:
    parsed = console.parse(realruns / HFDS)
    assert parsed.overflows["scale"].to_list() == [256.0, 128.0]  # [deepscale], ZeRO-3
    run = _run(realruns / HFDS)
    # the run-end summary is not a curve point: it is kept whole in attrs (last of 16 ranks)
    assert run.attrs["run_summary"]["train_runtime"] == pytest.approx(871.7935)
    assert "train_runtime" not in set(run.frame["metric"].to_list())


def test_random_ltd_perplexity_turns_nan(realruns: Path) -> None:
    run = _run(realruns / LTD)
    ppl = run.frame.filter(pl.col("metric") == "perplexity").sort("step")
    assert ppl["value"][0] == 61.57951131190911
    assert ppl["value"].is_nan().sum() == 5 and ppl["step"].to_list() == list(range(1, 9))
