"""DeepSpeed-Chat PPO console log (step 3 of DeepSpeed-Chat), as in the public DeepSpeed-Chat logs
(docs/formats.md#deepspeed-chat).

Per step: the fp16 scaler's ``[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss
scale: X, reducing to Y`` line (or ``..., but hysteresis is H. Reducing hysteresis to H-1``)
before the step's ``epoch: 0|step: N|ppo_ep: 1|act_loss: ...|cri_loss: ...|unsuper_loss:
0.0`` line, then ``average reward score: R`` and the ``|E2E latency=...`` line; every
``log_interval`` steps DeepSpeed's ``step=N, skipped=K, lr=[...], mom=[...]`` line (K is
cumulative). When an overflow hits the minimum scale, DeepSpeed raises "Current loss scale
already at minimum - cannot decrease scale anymore. Exiting run." and the log ends there.
DeepSpeed-Chat logs no grad norm: only healthy runs and fp16 scaler collapses are written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from proxydiag.synth.sim import SynthRun

MIN_SCALE = 1.0


def _stamp(wall: float) -> str:
    dt = datetime.fromtimestamp(wall, UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%S") + f",{dt.microsecond // 1000:03d}"


def _overflow_line(wall: float, attempted: float, after: float) -> str:
    where = f"[{_stamp(wall)}] [INFO] [loss_scaler.py:{{line}}:update_scale] [deepspeed] OVERFLOW!"
    if after == attempted:
        return (
            where.format(line=188) + f" Rank 0 Skipping step. Attempted loss scale: "
            f"{int(attempted)}, but hysteresis is 2. Reducing hysteresis to 1"
        )
    return (
        where.format(line=181) + f" Rank 0 Skipping step. Attempted loss scale: "
        f"{int(attempted)}, reducing to {int(after)}"
    )


def step_lines(sr: SynthRun, *, log_interval: int) -> list[str]:
    """The log lines of ``sr`` (fp16 only)."""
    v = sr.values
    scale = v["loss_scale"]
    attempted = np.concatenate([[2.0**sr.dynamics.init_scale_log2], scale[:-1]])
    skipped_total = np.cumsum(v["skipped"]).astype(int)
    batch = float(v["samples"][0])
    lines: list[str] = []
    for i in range(sr.n_steps):
        step, wall, st = i + 1, float(sr.wall_time[i]), float(v["step_time"][i])
        if v["skipped"][i] > 0:
            if attempted[i] <= MIN_SCALE:
                lines.append(
                    f"[{_stamp(wall)}] [ERROR] [loss_scaler.py:176:update_scale] Current loss "
                    "scale already at minimum - cannot decrease scale anymore. Exiting run."
                )
                break
            lines.append(_overflow_line(wall, attempted[i], scale[i]))
        lines += [
            f"epoch: 0|step: {step}|ppo_ep: 1|act_loss: {float(v['pg_loss'][i])!r}|"
            f"cri_loss: {abs(float(v['pg_loss'][i])) * 0.7!r}|unsuper_loss: 0.0",
            f"average reward score: {float(v['reward'][i])!r}",
            "-" * 85,
            f"|E2E latency={st:.2f}s |Gather latency=0.00s (0.00%) |Generate time="
            f"{0.66 * st:.2f}s (66.00%) |Training time={0.28 * st:.2f}s (28.00%) |Others="
            f"{0.06 * st:.2f} (6.00%)|CurSamplesPerSec={batch / st:.2f} |AvgSamplesPerSec="
            f"{batch / st:.2f}",
        ]
        if step % log_interval == 0:
            lr = float(v["lr"][i])
            lines.append(
                f"[{_stamp(wall)}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, "
                f"skipped={skipped_total[i]}, lr=[{lr!r}, {lr!r}], mom=[(0.9, 0.95), (0.9, 0.95)]"
            )
    return lines


def write(run_dir: Path, sr: SynthRun, *, naming: str, log_interval: int) -> Path:
    """Write ``train.log`` in ``run_dir``; ``naming`` must be ``deepspeed``, precision fp16."""
    path = run_dir / "train.log"
    head = [
        f"[{_stamp(float(sr.wall_time[0]))}] [INFO] [logging.py:96:log_dist] [Rank 0] "
        "DeepSpeed info: version=0.9.0, git-hash=unknown, git-branch=unknown",
        "***** Running training *****",
        "Beginning of Epoch 1/1, Total Generation Batches 1",
    ]
    path.write_text("\n".join([*head, *step_lines(sr, log_interval=log_interval)]) + "\n")
    return path
