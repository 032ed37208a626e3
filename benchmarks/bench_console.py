"""Console logs: lines/s of the vectorised reader vs a per-line ``re`` loop, and streaming memory.

Inputs (generated, cached under ``benchmarks/.cache``):

- a Megatron-LM log: 1,000,000 timestamped iteration lines (13 fields each);
- a DeepSpeed(-Chat) log: 1,000,000 lines of ``step=N, skipped=K, lr=[...]`` + timer lines,
  with ``OVERFLOW!`` lines now and then;
- a log of a trainer no dialect knows (torchtitan's coloured ``step: N  loss: …`` lines, 1,000,000
  of them), read by the metric-line grammar; its baseline a ``re`` loop written for that one
  format;
- a streaming log (mostly launcher noise, as cluster logs are: a DeepSpeed ``step=`` and timer
  line pair every 50 lines) of
  ``PROXYDIAG_BENCH_CONSOLE_MB`` MB (default 512; set 5120 for the 5 GB check), read in a
  fresh process to report peak RSS above the idle interpreter.

The baseline is what a user writes today: a Python loop over lines with ``re`` that pulls
the same numbers into lists (no step resolution, no overflow rules -- it does less).
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from benchmarks.common import Context, Peak, Row, alternate, peak_rss_mb

MEGATRON = (
    "[2024-05-01 10:{m:02d}:{s:02d}.123456] iteration {i:8d}/ 1000000 | "
    "consumed samples: {cs:12d} | "
    "elapsed time per iteration (ms): {t:.1f} | throughput per GPU (TFLOP/s/GPU): 180.3 | "
    "learning rate: {lr:.6E} | global batch size:   512 | lm loss: {loss:.6E} | "
    "loss scale: 65536.0 | grad norm: {gn:.3f} | num zeros: 0 | params norm: 1234.567 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |\n"
)
DS_STEP = (
    "[2023-04-18 01:{m:02d}:{s:02d},142] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, "
    "skipped={k}, lr=[{lr!r}, {lr!r}], mom=[(0.9, 0.95), (0.9, 0.95)]\n"
)
DS_TIMER = (
    "[2023-04-18 01:{m:02d}:{s:02d},171] [INFO] [timer.py:199:stop] epoch=0/micro_step={i}/"
    "global_step={i}, RunningAvgSamplesPerSec=173.44556, CurrSamplesPerSec={c:.5f}, "
    "MemAllocated=3.96GB, MaxMemAllocated=22.95GB\n"
)
DS_OVERFLOW = (
    "[2023-04-18 01:46:53,259] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! "
    "Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768\n"
)
NOISE = "azwus2f4C3:1234:5678 [3] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7\n"

_MEG_RE = re.compile(r"iteration\s+(\d+)/")
_MEG_KV = re.compile(r"\|\s*([^|:]+?):\s*([-+\d.eE]+)")
_DS_RE = re.compile(r"step=(\d+), skipped=(\d+), lr=\[([^,\]]+)")
_TIMER_RE = re.compile(
    r"global_step=(\d+), RunningAvgSamplesPerSec=([^,]+), CurrSamplesPerSec=([^,]+)"
)
_OVF_RE = re.compile(
    r"OVERFLOW! Rank \d+ Skipping step\. Attempted loss scale: (\S+), reducing to (\S+)"
)


def run(ctx: Context) -> list[Row]:
    from proxydiag.ingest import ReadContext, console

    n = ctx.size(1_000_000, 20_000)
    rows: list[Row] = []
    for label, writer, naive in (
        ("megatron", _write_megatron, _naive_megatron),
        ("deepspeed", _write_deepspeed, _naive_deepspeed),
        ("grammar (torchtitan-style)", _write_generic, _naive_generic),
    ):
        path = writer(ctx.cache, n)
        group = f"console {label} {n:,} lines"
        tools: dict[str, Callable[[], object]] = {
            "proxydiag": partial(console.read, path, ReadContext()),
            "proxydiag parse only": partial(console.parse, path),
            "python re loop": partial(naive, path),
        }
        cpu: dict[str, float] = {}
        times = alternate(tools, repeat=ctx.repeat, cpu=cpu)
        notes = {
            "proxydiag": (
                "lines/s; file -> canonical Run (incl. build_run: restarts, aliases, sort)"
            ),
            "proxydiag parse only": "lines/s; file -> raw frame (steps, overflows resolved)",
            "python re loop": "lines/s; numbers into Python lists only",
        }
        peak = _peak(path, writer(ctx.cache, 20_000))
        rows += [
            Row(
                group,
                tool,
                secs,
                n,
                peak_mb=peak.mb if tool == "proxydiag" else None,
                note=f"{notes[tool]}; {n / cpu[tool]:,.0f} lines per CPU-s"
                + (f"; {peak.note}" if tool == "proxydiag" else ""),
            )
            for tool, secs in times.items()
        ]
    rows.append(_streaming(ctx))
    return rows


#: a trainer no dialect knows: read by the metric-line grammar (torchtitan's shape)
GENERIC = (
    "[rank0]:[titan] 2026-12-07 10:{m:02d}:{s:02d},123 - root - INFO - \x1b[31mstep: {i:6d}  "
    "\x1b[32mloss: {loss:7.4f}  \x1b[33mgrad_norm: {gn:7.4f}  \x1b[38;2;180;60;0mmemory: "
    "31.21GiB(40.11%)  \x1b[34mtps: {tps:,}  \x1b[36mtflops: 123.45  \x1b[35mmfu: 12.51%\x1b[39m\n"
)
_GEN_STEP = re.compile(r"step:\s*(\d+)")
_GEN_KV = re.compile(r"(\w+):\s*([-+\d.eE,]+)")


def _write_generic(cache: Path, n: int) -> Path:
    path, done = _cached(cache, f"generic_{n}.log")
    if done:
        return path
    rng = random.Random(0)
    with path.open("w") as fh:
        for i in range(n):
            fh.write(
                GENERIC.format(
                    m=i // 60 % 60,
                    s=i % 60,
                    i=i,
                    loss=2 + rng.random(),
                    gn=rng.random(),
                    tps=rng.randrange(5000, 9000),
                )
            )
    return path


def _naive_generic(path: Path) -> dict[str, list[float]]:
    """What a user writes for one trainer's lines: strip colours, find the step and the pairs."""
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    out: dict[str, list[float]] = {}
    with path.open() as fh:
        for line in fh:
            text = ansi.sub("", line)
            m = _GEN_STEP.search(text)
            if m is None:
                continue
            for key, value in _GEN_KV.findall(text[m.end() :]):
                out.setdefault(key, []).append(float(value.replace(",", "")))
    return out


def _streaming(ctx: Context) -> Row:
    mb = 4 if ctx.smoke else int(os.environ.get("PROXYDIAG_BENCH_CONSOLE_MB", "512"))
    path = _write_stream(ctx.cache, mb)
    t0 = time.perf_counter()
    peak = _peak(path, _write_stream(ctx.cache, 4))
    seconds = time.perf_counter() - t0  # the log is read once, in that process
    return Row(
        f"console stream {mb} MB",
        "proxydiag",
        [seconds],
        int(peak.lines or 0),
        peak_mb=peak.mb,
        note=f"lines/s incl. process start; {peak.note}, {peak.points or 0:,} points",
    )


def _peak(path: Path, small: Path) -> Peak:
    """Peak memory of reading ``path`` (after reading ``small``, which warms the reader up)."""
    return peak_rss_mb(
        f"run = proxydiag.read_run(Path({str(path)!r}))",
        warm=f"proxydiag.read_run(Path({str(small)!r}))",
    )


def _cached(cache: Path, name: str) -> tuple[Path, bool]:
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / name
    return path, path.exists() and path.stat().st_size > 0


def _write_megatron(cache: Path, n: int) -> Path:
    path, done = _cached(cache, f"megatron_{n}.log")
    if done:
        return path
    rng = random.Random(0)
    with path.open("w") as fh:
        for i in range(1, n + 1):
            fh.write(
                MEGATRON.format(
                    m=(i // 60) % 60,
                    s=i % 60,
                    i=i,
                    cs=i * 512,
                    t=1234.5 + rng.random(),
                    lr=1e-4 * rng.random(),
                    loss=3 * rng.random(),
                    gn=rng.random(),
                )
            )
    return path


def _write_deepspeed(cache: Path, n: int) -> Path:
    path, done = _cached(cache, f"deepspeed_{n}.log")
    if done:
        return path
    rng = random.Random(0)
    skipped = 0
    with path.open("w") as fh:
        for i in range(1, n // 2 + 1):
            if i % 97 == 0:
                fh.write(DS_OVERFLOW)
                skipped += 1
            m, s = (i // 60) % 60, i % 60
            fh.write(DS_STEP.format(m=m, s=s, i=i, k=skipped, lr=1e-5 * rng.random()))
            fh.write(DS_TIMER.format(m=m, s=s, i=i, c=170 + rng.random()))
    return path


def _write_stream(cache: Path, mb: int) -> Path:
    path, done = _cached(cache, f"stream_{mb}MB_1in50.log")
    if done:
        return path
    first = 1
    with path.open("w") as fh:
        while fh.tell() < mb * 1024 * 1024:
            fh.write(
                "".join(
                    NOISE * 48
                    + DS_STEP.format(m=0, s=0, i=i, k=0, lr=1e-5)
                    + DS_TIMER.format(m=0, s=0, i=i, c=171.0)
                    for i in range(first, first + 1000)
                )
            )
            first += 1000
    return path


def _naive_megatron(path: Path) -> int:
    steps: list[int] = []
    keys: list[str] = []
    values: list[float] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = _MEG_RE.search(line)
            if m is None:
                continue
            step = int(m.group(1))
            for key, value in _MEG_KV.findall(line):
                steps.append(step)
                keys.append(key)
                values.append(float(value))
    return len(values)


def _naive_deepspeed(path: Path) -> int:
    out: list[tuple[int, str, float]] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if (m := _DS_RE.search(line)) is not None:
                step = int(m.group(1))
                out += [(step, "skipped", float(m.group(2))), (step, "lr", float(m.group(3)))]
            elif (m := _TIMER_RE.search(line)) is not None:
                step = int(m.group(1))
                out += [(step, "avg", float(m.group(2))), (step, "cur", float(m.group(3)))]
            elif (m := _OVF_RE.search(line)) is not None:
                out.append((-1, "scale", float(m.group(2))))
    return len(out)
