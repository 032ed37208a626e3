"""One step axis for a log whose metric lines count steps by their order while other lines
(DeepSpeed's ``step=`` and overflow lines, Megatron-style iteration lines) carry a counter;
and a loss scale at its floor that still overflows is no calibration."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import polars as pl

from proxydiag.diagnose.api import diagnose
from proxydiag.ingest import console, read_run

DS_STEP = (
    "[2026-12-07 10:00:0{s},100] [INFO] [logging.py:96:log_dist] [Rank 0] step={n}, "
    "skipped={k}, lr=[1e-05], mom=[(0.9, 0.95)]"
)
DS_OVF = (
    "[2026-12-07 10:00:0{s},100] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
    "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a}, reducing to {b}"
)


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def _loss(path: Path) -> list[tuple[int, float]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = console.parse(path).raw
    return raw.filter(pl.col("key") == "loss").sort("step").select("step", "value").rows()


def test_metric_lines_counted_in_order_take_the_counter_of_sparse_step_lines(
    tmp_path: Path,
) -> None:
    """A loss line every step, a DeepSpeed ``step=`` line every 4: the losses are steps 1..12
    on the counter's axis, the overflow between two loss lines is the next one's step."""
    lines: list[str] = []
    for n in range(1, 13):
        if n == 6:
            lines.append(DS_OVF.format(s=n % 10, a=1024, b=512))
        lines.append(f"loss: {3 - n / 10:.4f} lr: 1.0e-05 grad_norm: 0.9")
        if n % 4 == 0:
            lines.append(DS_STEP.format(s=n % 10, n=n, k=int(n >= 6)))
    path = _write(tmp_path, lines)
    assert [s for s, _ in _loss(path)] == list(range(1, 13))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = console.parse(path)
    assert parsed.overflows["step"].to_list() == [6]
    assert "the order of the metric lines" in str(parsed.attrs.get("step_source"))


def test_order_lines_with_a_logging_interval_follow_the_counter_stride(tmp_path: Path) -> None:
    """Metric lines every 10 steps, iteration lines every 20: step = 10 k."""
    lines: list[str] = []
    for k in range(1, 9):
        lines.append(f"train | loss: {2 - k / 20:.3f} | ppl: {math.exp(2 - k / 20):.3f}")
        if k % 2 == 0:
            lines.append(f" iteration {10 * k:8d}/ 1000 | consumed samples: {320 * k} |")
    path = _write(tmp_path, lines)
    assert [s for s, _ in _loss(path)] == [10 * k for k in range(1, 9)]


def test_a_config_line_beside_counted_steps_stays_no_point(tmp_path: Path) -> None:
    """Two step-less lines of pairs among per-step counter lines: a config dump, dropped."""
    lines = ["lr=0.001 warmup=100 batch_size=8", "kl_coef=0.05 clip=0.2"]
    lines += [f"step {n} | loss: {2 - n / 100:.3f}" for n in range(1, 21)]
    path = _write(tmp_path, lines)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = console.parse(path).raw
    assert set(raw["key"].cast(pl.Utf8).unique().to_list()) == {"loss"}


def _floor_log(tmp_path: Path, *, floor: bool) -> Path:
    """A DeepSpeed fp16 log: the scaler calibrates 65536 -> 1024 over 6 overflows, learns;
    with ``floor``, from step 30 every step overflows at a scale of 1 and the loss is NaN."""
    lines: list[str] = []
    scale = 65536
    skipped = 0
    for n in range(1, 61):
        bad = floor and n >= 30
        if n <= 6 or bad:
            new = max(scale // 2, 1) if not bad else 1
            lines.append(DS_OVF.format(s=n % 10, a=scale if not bad else 1, b=new))
            scale, skipped = new, skipped + 1
        loss = "nan" if bad else f"{2.5 - n / 100:.4f}"
        lines.append(f"loss: {loss} lr: 1.0e-05")
        if n % 5 == 0:
            lines.append(DS_STEP.format(s=n % 10, n=n, k=skipped))
    return _write(tmp_path, lines)


def test_overflows_at_a_scale_of_one_with_nan_losses_are_gradient_overflow(
    tmp_path: Path,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = diagnose(read_run(_floor_log(tmp_path, floor=True)))
    assert bad.label == "gradient_overflow"
    assert bad.onset_step is not None and 29 <= bad.onset_step <= 31
    assert any(e.kind == "scale_floor" for e in bad.events)


def test_the_calibration_burst_alone_stays_healthy(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok = diagnose(read_run(_floor_log(tmp_path, floor=False)))
    assert ok.label == "healthy", [e.evidence for e in ok.events]
    assert not any(e.kind == "scale_floor" for e in ok.events)


def test_an_environment_dump_before_the_steps_takes_no_step(tmp_path: Path) -> None:
    """A job script's environment dump (``MANPATH_modshare=:1:/opt/man:1:…``) reads as lines
    of pairs without a step; before the run's progress lines they must not be put on the
    counter's axis at steps before its start (the last of them can still take step 0, next to
    the first metric line), and one progress line is no axis at all."""
    env = [
        f"VAR{i}_modshare=:1:/opt/tool{i}/man:1:/usr/share/man:3:/usr/local/man{i}:2"
        for i in range(40)
    ]
    one = _write(tmp_path, [*env, DS_STEP.format(s=1, n=10, k=0)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = console.parse(one).raw
    assert raw.filter(pl.col("key").cast(pl.Utf8).str.contains("man")).is_empty()
    # the same dump before a log whose metric lines do count on the step lines' axis
    lines = list(env)
    for n in range(1, 31):
        lines.append(f"loss: {3.0 - n / 100:.3f} grad_norm: {1.0 + n / 10:.2f}")
        if n % 5 == 0:
            lines.append(DS_STEP.format(s=n % 10, n=n, k=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = console.parse(_write(tmp_path, lines)).raw
    assert raw.filter(pl.col("step") < 0).is_empty()
    assert _loss(tmp_path / "run.log")[:2] == [(1, 2.99), (2, 2.98)]
