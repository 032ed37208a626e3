"""Synthetic snippets for every console dialect variant (docs/formats.md#console-logs)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import polars as pl
import pytest

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import ReadContext, console
from proxydiag.ingest.console import ConsoleParse
from proxydiag.run import Run


def _write(tmp_path: Path, text: str | bytes, name: str = "train.log") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _parse(tmp_path: Path, text: str | bytes) -> ConsoleParse:
    return console.parse(_write(tmp_path, text))


def _run(tmp_path: Path, text: str | bytes) -> Run:
    return console.read(_write(tmp_path, text), ReadContext())[0]


def _raw(parsed: ConsoleParse, key: str) -> dict[int, float]:
    rows = parsed.raw.filter(pl.col("key") == key).select("step", "value").rows()
    return {int(s): float(v) for s, v in rows}


# --- Megatron -------------------------------------------------------------------------------

MEG_2021 = (
    " iteration       20/    1000 | consumed samples:           80 | elapsed time per iteration "
    "(ms): 1354.9 | learning rate: 3.750E-05 | global batch size:     4 | lm loss: 1.203115E+01 | "
    "loss scale: 32768.0 | number of skipped iterations:   8 | number of nan iterations:   0 |\n"
)
MEG_2024 = (
    " [2024-03-01 10:00:00] iteration      100/    1000 | consumed samples:        51200 | "
    "elapsed time per iteration (ms): 1200.5 | learning rate: 1.000000E-04 | global batch size:"
    "   512 | lm loss: 2.500000E+00 | loss scale: 1.0 | grad norm: 0.812 | num zeros: 0.0 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |\n"
)
MEG_NOW = (
    " [2024-12-01 10:00:00.250000] iteration      101/    1000 | consumed samples:        51712 "
    "| elapsed time per iteration (ms): 1199.0 | throughput per GPU (TFLOP/s/GPU): 180.3 | "
    "learning rate: 9.999990E-05 | global batch size:   512 | lm loss: 2.400000E+00 | "
    "load_balancing_loss: 1.020000E+00 | z_loss: 3.000000E-03 | loss scale: 1.0 | grad norm: "
    "0.799 | num zeros: 0 | params norm: 1234.567 | number of skipped iterations:   0 | "
    "number of nan iterations:   0 |\n"
)


def test_megatron_every_historical_variant(tmp_path: Path) -> None:
    parsed = _parse(tmp_path, MEG_2021 + MEG_2024 + MEG_NOW)
    assert _raw(parsed, "lm loss") == {20: 12.03115, 100: 2.5, 101: 2.4}
    assert _raw(parsed, "learning rate") == {20: 3.75e-05, 100: 1e-4, 101: 9.99999e-05}
    assert _raw(parsed, "number of skipped iterations") == {20: 8.0, 100: 0.0, 101: 0.0}
    assert _raw(parsed, "load_balancing_loss") == {101: 1.02}
    assert _raw(parsed, "throughput per GPU (TFLOP/s/GPU)") == {101: 180.3}
    walls = parsed.raw.filter(pl.col("key") == "lm loss")["wall_time"].to_list()
    assert walls == [None, 1709287200.0, 1733047200.25]


def test_megatron_nan_loss_is_absent_not_invented(tmp_path: Path) -> None:
    line = MEG_2024.replace("lm loss: 2.500000E+00 | ", "").replace(
        "number of nan iterations:   0", "number of nan iterations:   1"
    )
    run = _run(tmp_path, line)
    assert "loss" not in run.metrics
    assert run.series("nonfinite")[1].tolist() == [1.0]


def test_megatron_validation_and_seconds_and_prefix(tmp_path: Path) -> None:
    text = (
        "[default7]: iteration    12695/  115311 | consumed samples:      9841584 | consumed "
        "tokens:  20155564032 | elapsed time per iteration (s): 105.22 | learning rate: 5.969E-05 "
        "| global batch size:  2048 | lm loss: 2.463556E+00 | grad norm: 0.174 | num zeros: 0.0 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: "
        "19.463 | TFLOPs: 149.02 |\n"
        "-----------------------------------------------------------------------------------\n"
        " validation loss at iteration 12695 | lm loss value: 2.398456E+00 | lm loss PPL: "
        "1.100558E+01 | \n"
    )
    run = _run(tmp_path, text)
    assert run.series("step_time")[1].tolist() == [105.22]
    assert run.series("tokens")[1].tolist() == [20155564032.0]
    assert run.series("lm loss validation")[1].tolist() == [2.398456]
    assert run.series("lm loss validation ppl")[1].tolist() == [11.00558]


def test_megatron_several_launcher_ranks_are_kept_apart(tmp_path: Path) -> None:
    base = MEG_2021.strip()
    text = f"[default0]:{base}\n[default7]:{base.replace('1.203115E+01', '1.1E+01')}\n"
    parsed = _parse(tmp_path, text)
    assert _raw(parsed, "lm loss") == {20: 12.03115}
    assert _raw(parsed, "lm loss@rank7") == {20: 11.0}


def test_megatron_restart_is_recorded(tmp_path: Path) -> None:
    lines = [MEG_2021.replace("      20/", f"{s:8d}/") for s in (10, 20, 30, 20, 30, 40)]
    run = _run(tmp_path, "".join(lines))
    assert next(e.onset_step for e in run.events if e.kind == "restart") == 20
    assert run.series("loss")[0].tolist() == [10, 20, 30, 40]


# --- DeepSpeed ------------------------------------------------------------------------------


def _ds(msg: str, second: int = 0) -> str:
    return f"[2023-04-18 01:46:{second:02d},554] [INFO] [loss_scaler.py:181:update_scale] {msg}\n"


def _step(step: int, skipped: int, lr: float = 1e-5) -> str:
    return (
        f"[2023-04-18 01:47:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, "
        f"skipped={skipped}, lr=[{lr}, {lr}], mom=[(0.9, 0.95), (0.9, 0.95)]\n"
    )


def test_deepspeed_every_overflow_spelling_counts_once(tmp_path: Path) -> None:
    text = (
        _ds(
            "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but "
            "hysteresis is 2. Reducing hysteresis to 1"
        )
        + _ds(
            "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: "
            "65536, reducing to 32768"
        )
        + _ds(
            "[deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: "
            "32768.0, reducing to 16384.0"
        )
        + _ds(
            "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: "
            "16384.0, reducing to 8192.0"
        )
        + _ds(
            "[Rank 0] Overflow detected. Skipping step. Attempted loss scale: "
            "8192.0, reducing to 4096.0"
        )
        + _step(10, 5)
        + _ds("Consecutive hysteresis is enabled. Restoring hysteresis to 2")
        + _step(20, 5)
    )
    parsed = _parse(tmp_path, text)
    assert parsed.overflows.height == 5
    assert parsed.overflows["attempted"].to_list() == [65536.0, 65536.0, 32768.0, 16384.0, 8192.0]
    assert parsed.overflows["scale"].to_list() == [65536.0, 32768.0, 16384.0, 8192.0, 4096.0]
    assert _raw(parsed, "ds_overflow") == {10: 5.0}
    assert _raw(parsed, "ds_loss_scale") == {10: 4096.0}
    assert _raw(parsed, "ds_loss_scale_attempted") == {10: 65536.0}
    assert parsed.attrs["overflow_step_uncertainty"] == 10
    assert parsed.raw["wall_time"].drop_nulls().min() == pytest.approx(1681782360.554)


def test_deepspeed_rank_repeated_iteration_lines_and_splices(tmp_path: Path) -> None:
    head = "[2025-01-02 15:47:32,711] [INFO] [fused_optimizer.py:392:_update_scale]"
    reduce = f"{head} Reducing dynamic loss scale from 65536 to 32768.0"
    block = "".join(f"{head}\nGrad overflow on iteration 0\n{reduce}\n" for _ in range(8))
    spliced = f"{head} Reducing dynamic loss scale fr{reduce}\n"
    block2 = "".join(f"{head}\nGrad overflow on iteration: 1\n" for _ in range(8)) + spliced
    text = block + block2 + _step(10, 2) + _step(20, 2)
    parsed = _parse(tmp_path, text)
    assert parsed.overflows["step"].to_list() == [1, 2]
    assert parsed.attrs["overflow_step_uncertainty"] == 0
    assert _raw(parsed, "ds_overflow") == {1: 1.0, 2: 1.0}
    assert _raw(parsed, "ds_loss_scale") == {1: 32768.0, 2: 32768.0}  # the same text, rank-repeated


def test_deepspeed_lower_ranks_only(tmp_path: Path) -> None:
    msg = "[deepspeed] OVERFLOW! Rank {} Skipping step. Attempted loss scale: 1024, reducing to 512"
    text = "".join(_ds(msg.format(r)) for r in range(4)) + _step(1, 1)
    assert _parse(tmp_path, text).overflows.height == 1


def test_counter_wins_over_overflow_lines(tmp_path: Path) -> None:
    msg = "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1024, reducing to 512"
    run = _run(tmp_path, _ds(msg) + _step(10, 3) + _step(20, 3))
    assert "ds_overflow_lines" in run.metrics and "ds_overflow" not in run.frame["key"].to_list()
    events = [e for e in run.events if e.kind == "skip_count_mismatch"]
    assert len(events) == 1 and "counter wins" in events[0].evidence
    assert run.series("skipped_total")[1].tolist() == [3.0, 0.0]


def test_minimum_loss_scale_is_an_event(tmp_path: Path) -> None:
    text = (
        _step(10, 0)
        + _ds("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.")
        + _step(20, 0)
    )
    run = _run(tmp_path, text)
    assert [(e.kind, e.onset_step, e.severity) for e in run.events] == [
        ("loss_scale_minimum", 20, "critical")
    ]


def test_deepspeed_timer_and_pipeline_lines(tmp_path: Path) -> None:
    text = (
        "[2023-04-18 01:46:59,171] [INFO] [timer.py:199:stop] "
        "epoch=0/micro_step=10/global_step=10, "
        "RunningAvgSamplesPerSec=173.4455644119137, CurrSamplesPerSec=171.97903593624417, "
        "MemAllocated=3.96GB, MaxMemAllocated=22.95GB\n"
        "steps: 100 loss: 2.3456 iter time (s): 0.512 samples/sec: 125.000\n"
    )
    parsed = _parse(tmp_path, text)
    assert _raw(parsed, "CurrSamplesPerSec") == {10: 171.97903593624417}
    assert _raw(parsed, "MaxMemAllocated") == {10: 22.95}
    assert _raw(parsed, "loss") == {100: 2.3456}
    assert _raw(parsed, "iter time (s)") == {100: 0.512}


def test_interleaved_engines_are_suffixed(tmp_path: Path) -> None:
    text = (
        _step(10, 4, 5e-7)
        + _step(10, 3, 3e-7)
        + "x\n" * 20
        + _step(20, 5, 6e-7)
        + _step(20, 3, 4e-7)
    )
    parsed = _parse(tmp_path, text)
    assert parsed.attrs["engines"] == 2
    assert _raw(parsed, "ds_skipped") == {10: 4.0, 20: 5.0}
    assert _raw(parsed, "ds_skipped@engine1") == {10: 3.0, 20: 3.0}
    assert _raw(parsed, "lr@engine1") == {10: 3e-7, 20: 4e-7}


# --- DeepSpeed-Chat ---------------------------------------------------------------------------

PPO = (
    "epoch: 0|step: 0|ppo_ep: 1|act_loss: 0.2099609375|cri_loss: 0.12042236328125|"
    "unsuper_loss: 0.0\n"
    "average reward score: -0.67919921875\n"
    "-------------------------------------------------------------------------------------\n"
    "|E2E latency=7.99s |Gather latency=0.00s (0.00%) |Generate time=5.26s (65.81%) |Training "
    "time=2.52s (31.46%) |Others=0.22 (2.73%)|CurSamplesPerSec=8.01 |AvgSamplesPerSec=8.01\n"
    "epoch: 0|step: 1|ppo_ep: 1|act_loss: nan|cri_loss: 0.1|unsuper_loss: 0.0\n"
    "average reward score: inf\n"
)


def test_dschat_ppo_lines_and_what_follows_them(tmp_path: Path) -> None:
    run = _run(tmp_path, PPO)
    steps, values = run.series("reward")
    assert steps.tolist() == [0, 1] and values[0] == -0.67919921875 and values[1] == math.inf
    assert math.isnan(run.series("pg_loss")[1][1])
    assert run.series("step_time")[1].tolist() == [7.99]
    assert run.series("generate_time")[1].tolist() == [5.26]
    assert run.series("CurSamplesPerSec")[0].tolist() == [0]


def test_dschat_sft_and_reward_model_evaluations(tmp_path: Path) -> None:
    text = (
        "***** Evaluating perplexity, Epoch 0/16 *****\nppl: 4998.29638671875\n"
        + _step(10, 0)
        + _step(20, 0)
        + "***** Evaluating perplexity, Epoch 1/16 *****\nppl: 2.0179834365844727\n"
        "chosen_last_scores (higher is better) : 2.8115079402923584, "
        "acc (higher is better) : 0.49\n"
        "Epoch 1/1 with loss 0.6731\nStep at 4 with Perplexity: nan\n"
    )
    parsed = _parse(tmp_path, text)
    assert _raw(parsed, "ppl") == {0: 4998.29638671875, 20: 2.0179834365844727}
    assert _raw(parsed, "acc") == {20: 0.49}
    assert _raw(parsed, "epoch_loss") == {20: 0.6731}
    assert math.isnan(_raw(parsed, "perplexity")[4])


# --- fairseq, veRL, dicts, MindSpeed ---------------------------------------------------------

FAIRSEQ = (
    '2021-03-01 10:00:00 | INFO | train_inner | {"epoch": 1, "update": 0.5, "loss": "9.82", '
    '"nll_loss": "9.7", "ppl": "903.4", "wps": "12345.6", "lr": "0.0005", "gnorm": "1.234", '
    '"loss_scale": "128", "num_updates": "100", "wall": "60"}\n'
    "2021-03-01 10:00:01 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring "
    "gradient, setting loss scale to: 64.0\n"
    '2021-03-01 10:00:02 | INFO | train_inner | {"epoch": 1, "update": 0.6, "loss": "9.5", '
    '"gnorm": "inf", "num_updates": "200"}\n'
    '2021-03-01 10:00:03 | INFO | valid | {"epoch": 1, "valid_loss": "9.1", "valid_ppl": "548.75", '
    '"valid_num_updates": "200"}\n'
    "epoch 001:    300 / 1234 loss=9.2, nll_loss=9.0, num_updates=300\n"
    "2021-03-01 10:00:04 | INFO | fairseq.trainer | AMP: overflow detected, "
    "setting scale to to 32.0\n"
    '2021-03-01 10:00:05 | INFO | train_inner | {"epoch": 1, "loss": "9.0", "num_updates": "400"}\n'
    "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.\n"
)


def test_fairseq_json_lines_and_overflow(tmp_path: Path) -> None:
    parsed = _parse(tmp_path, FAIRSEQ)
    assert parsed.attrs["loss_base"] == 2
    assert _raw(parsed, "loss") == {100: 9.82, 200: 9.5, 300: 9.2, 400: 9.0}
    assert _raw(parsed, "gnorm")[200] == math.inf
    assert _raw(parsed, "valid_loss") == {200: 9.1}
    assert _raw(parsed, "fairseq_overflow") == {200: 1.0, 400: 1.0}
    assert _raw(parsed, "fairseq_loss_scale") == {200: 64.0, 400: 32.0}
    assert [(e.kind, e.onset_step) for e in parsed.events] == [("loss_scale_minimum", 400)]
    assert parsed.raw.filter(pl.col("key") == "loss")["wall_time"][0] == 1614592800.0


def test_verl_console_lines(tmp_path: Path) -> None:
    text = (
        "(TaskRunner pid=1234) step:0 - actor/pg_loss:np.float64(0.012) - actor/grad_norm:0.5 - "
        "critic/score/mean:np.float64(0.25) - training/rollout_probs_diff_mean:0.001\n"
        "(WorkerDict pid=99) WARN: rank 0 grad_norm is not finite: inf\n"
        "(WorkerDict pid=98) WARN: rank 1 grad_norm is not finite: inf\n"
        "(TaskRunner pid=1234) step:1 - actor/pg_loss:nan - actor/grad_norm:inf - "
        "critic/score/mean:np.float64(-0.5)\n"
    )
    run = _run(tmp_path, text)
    assert run.series("pg_loss")[1][0] == 0.012 and math.isnan(run.series("pg_loss")[1][1])
    assert run.series("grad_norm")[1].tolist() == [0.5, math.inf]
    assert run.series("reward")[1].tolist() == [0.25, -0.5]
    assert run.series("mismatch_prob_diff")[1].tolist() == [0.001]
    assert run.series("skipped")[0].tolist() == [1]  # two ranks warned once for step 1


def test_slime_and_hf_dicts_are_literals_never_code(tmp_path: Path) -> None:
    evil = tmp_path / "pwned"
    text = (
        "[2025-01-01 12:00:00] model.py:123 - step 3: {'train/loss': 0.5, 'train/grad_norm': 1.5}\n"
        "perf 3: {'perf/step_time': 12.5}\n"
        "  5%|5         | 10/200 [00:10<03:10]\r{'loss': 2.31, 'grad_norm': 1.2, "
        "'learning_rate': 5e-05, 'epoch': 0.1}\n"
        "{'loss': 2.1, 'learning_rate': 4e-05, 'epoch': 0.2}\n"
        "{'eval_loss': 2.2, 'epoch': 0.2}\n"
        f"{{'loss': __import__('os').system('touch {evil}')}}\n"
        "{'random_ltd': {'enabled': True, 'layer_num': 12}}\n"
    )
    with pytest.warns(IngestWarning, match="not Python literals"):
        parsed = _parse(tmp_path, text)
    assert not evil.exists()
    assert _raw(parsed, "train/loss") == {3: 0.5}
    assert _raw(parsed, "perf/step_time") == {3: 12.5}
    # the tqdm counter drawn before the first dict is its step; the next dict has none
    assert _raw(parsed, "loss") == {10: 2.31, 11: 2.1}
    assert _raw(parsed, "eval_loss") == {11: 2.2}
    assert "the tqdm counter on the same line" in parsed.attrs["step_source"]


def test_mindspeed_lines(tmp_path: Path) -> None:
    text = (
        "2025-01-01 12:00:00 - INFO - [2025-01-01 12:00:00] iteration: 3 / 100 | actor/pg_loss : "
        "0.0123 | actor/lr : 1.000000e-06 | grpo/score/mean : 0.5000 | timing/all : 12.3456\n"
    )
    run = _run(tmp_path, text)
    assert run.series("pg_loss")[1].tolist() == [0.0123]
    assert run.series("lr")[1].tolist() == [1e-06]
    assert run.series("reward")[1].tolist() == [0.5]
    assert run.attrs["pg_loss_abs"] is True


# --- robustness -----------------------------------------------------------------------------


def test_garbage_bytes_and_an_unfinished_last_line(tmp_path: Path) -> None:
    data = b"\xff\xfe latin-1 \xe9t\xe9\n" + MEG_2021.encode() + MEG_2024.encode()[:80]
    with pytest.warns(IngestWarning, match=r"train.log:3: the last line has no newline"):
        parsed = _parse(tmp_path, data)
    assert _raw(parsed, "lm loss") == {20: 12.03115}


def test_non_numeric_value_is_skipped_with_file_and_line(tmp_path: Path) -> None:
    text = MEG_2021 + MEG_2024.replace("grad norm: 0.812", "grad norm: 0.8x12")
    with pytest.warns(IngestWarning, match=r"train.log:2: 1 Megatron value\(s\) are not numbers"):
        parsed = _parse(tmp_path, text)
    assert _raw(parsed, "grad norm") == {}
    assert _raw(parsed, "lm loss") == {20: 12.03115, 100: 2.5}


def test_small_chunks_read_the_same_as_one(tmp_path: Path) -> None:
    text = (MEG_2021 + _step(10, 0) + PPO + FAIRSEQ) * 3
    path = _write(tmp_path, text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = console.parse(path)
        pieces = console.parse(path, chunk_bytes=97)
    assert pieces.raw.height == whole.raw.height > 100
    # blocks interleave the dialects' rows; within a key the order is the file's
    assert pieces.raw.sort("key", maintain_order=True).equals(
        whole.raw.sort("key", maintain_order=True)
    )
    assert pieces.attrs == whole.attrs


def test_unknown_and_binary_files(tmp_path: Path) -> None:
    assert not console.can_read(_write(tmp_path, "hello\nworld\n", "a.txt"))
    assert not console.can_read(_write(tmp_path, b"\x00\x01step=1, skipped=0, lr=[1]\n", "b.bin"))
    assert not console.can_read(tmp_path)
    path = _write(tmp_path, "nothing to see\n", "c.log")
    with pytest.raises(IngestError, match=r"c\.log: no metric lines"):
        console.read(path, ReadContext())


def test_hf_log_index_runs_across_blocks_read_in_parallel(tmp_path: Path) -> None:
    text = "".join(
        f"{{'loss': {i / 10}, 'learning_rate': 5e-05, 'epoch': {i / 100}}}\n" for i in range(1, 301)
    )
    path = _write(tmp_path, MEG_2021.replace("[", "") * 50 + text)
    parsed = console.parse(path, chunk_bytes=512)
    loss = _raw(parsed, "loss")
    assert list(loss) == list(range(1, 301)) and loss[300] == 30.0


def test_a_giant_line_is_cut_and_memory_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proxydiag.ingest.console import _lines as console_lines

    monkeypatch.setattr(console_lines, "MAX_LINE_BYTES", 1000)
    path = _write(tmp_path, b"x" * 50_000 + b"\n" + MEG_2021.encode())
    with pytest.warns(IngestWarning, match=r"train.log:1: a line longer than 1000 bytes was cut"):
        frames = list(console_lines.iter_lines(path, chunk_bytes=100))
    lines = pl.concat(frames)
    assert lines["line"].to_list() == [1, 2]
    assert lines["text"][1] == MEG_2021.rstrip("\n")


def test_one_worker_reads_the_same_as_two(tmp_path: Path) -> None:
    path = _write(tmp_path, (MEG_2021 + _step(10, 0) + PPO) * 40)
    one = console.parse(path, chunk_bytes=700, workers=1)
    two = console.parse(path, chunk_bytes=700, workers=2)
    assert one.raw.equals(two.raw) and one.attrs == two.attrs
