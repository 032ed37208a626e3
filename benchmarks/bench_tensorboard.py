"""TensorBoard event files: 1,000,000 scalar points (50 tags × 20,000 steps) into a frame.

Two inputs, written by :mod:`benchmarks.tb_bulk_writer` (cached): legacy ``simple_value``
(tensorboardX / torch ``add_scalar``) and tensor-form float32 scalars (torch
``new_style=True``, plugin metadata on every event). proxydiag is timed end to end at full
size (``read_run``: framing, every CRC, decode, restart rules, aliases, canonical frame).

Baselines, alternated with proxydiag in the same run: tbparse (``SummaryReader.scalars``
/ ``.tensors``), TensorBoard's ``EventAccumulator`` with no size limit (the plugin
accumulator for tensor scalars) and ``EventFileLoader`` iterating every event. They run at
~25-60 s per million points, so they read a smaller file with the same layout and their
times are scaled linearly to 1,000,000 points (the note says so); memory is their measured
peak on that smaller file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import Context, Row, alternate, peak_rss_mb
from benchmarks.tb_bulk_writer import write_scalars

N_TAGS = 50


def _input(ctx: Context, *, form: str, n_steps: int) -> Path:
    out = ctx.cache / "tensorboard" / f"{form}-{N_TAGS}x{n_steps}"
    path = out / "events.out.tfevents.0000000000.bench"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        steps = np.arange(1, n_steps + 1)
        write_scalars(
            path,
            tags=[f"train/metric_{i:02d}" for i in range(N_TAGS)],
            steps=steps,
            values=rng.normal(size=(n_steps, N_TAGS)),
            wall_times=1.7e9 + steps * 0.5,
            form="simple" if form == "simple_value" else "tensor_f32",
        )
    return path


def _proxydiag(path: Path) -> Callable[[], int]:
    import proxydiag

    return lambda: proxydiag.read_run(path).frame.height


def _tbparse(path: Path, form: str) -> Callable[[], int]:
    from tbparse import SummaryReader

    attr = "scalars" if form == "simple_value" else "tensors"
    return lambda: len(getattr(SummaryReader(str(path.parent)), attr))


def _accumulator(path: Path, form: str) -> Callable[[], int]:
    if form == "simple_value":
        from tensorboard.backend.event_processing import event_accumulator as ea

        def legacy() -> int:
            acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
            acc.Reload()
            return sum(len(acc.Scalars(t)) for t in acc.Tags()["scalars"])

        return legacy
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea

    def plugin() -> int:
        acc = pea.EventAccumulator(str(path), size_guidance={pea.TENSORS: 0})
        acc.Reload()
        return sum(len(acc.Tensors(t)) for t in acc.Tags()["tensors"])

    return plugin


def _loader(path: Path) -> Callable[[], int]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    return lambda: sum(len(ev.summary.value) for ev in EventFileLoader(str(path)).Load())


_MEMORY = {
    "proxydiag": "run = proxydiag.read_run(Path({p!r}))",
    "tbparse": (
        "from tbparse import SummaryReader; getattr(SummaryReader(str(Path({p!r}).parent)), {a!r})"
    ),
    "EventAccumulator-simple_value": (
        "from tensorboard.backend.event_processing import event_accumulator as ea\n"
        "acc = ea.EventAccumulator({p!r}, size_guidance={{ea.SCALARS: 0, ea.TENSORS: 0}}); "
        "acc.Reload()"
    ),
    "EventAccumulator-tensor_f32": (
        "from tensorboard.backend.event_processing import plugin_event_accumulator as pea\n"
        "acc = pea.EventAccumulator({p!r}, size_guidance={{pea.TENSORS: 0}}); acc.Reload()"
    ),
    "EventFileLoader": (
        "from tensorboard.backend.event_processing.event_file_loader import EventFileLoader\n"
        "n = sum(1 for _ in EventFileLoader({p!r}).Load())"
    ),
}


def _group(ctx: Context, form: str) -> list[Row]:
    full_steps = ctx.size(20_000, 200)
    small = {
        "tbparse": ctx.size(2_000, 200),
        "EventAccumulator": ctx.size(2_000, 200),
        "EventFileLoader": ctx.size(1_000, 200),
    }
    paths = {"proxydiag": _input(ctx, form=form, n_steps=full_steps)}
    paths.update({tool: _input(ctx, form=form, n_steps=n) for tool, n in small.items()})
    fns: dict[str, Callable[[], Any]] = {
        "proxydiag": _proxydiag(paths["proxydiag"]),
        "tbparse": _tbparse(paths["tbparse"], form),
        "EventAccumulator": _accumulator(paths["EventAccumulator"], form),
        "EventFileLoader": _loader(paths["EventFileLoader"]),
    }

    def reads_every_point(tool: str, points: Any) -> None:
        assert points == N_TAGS * (full_steps if tool == "proxydiag" else small[tool]), tool

    times = alternate(fns, repeat=ctx.repeat, check=reads_every_point)
    points = N_TAGS * full_steps
    label = f"{points:,}" if ctx.smoke else "1M"
    rows = []
    for tool, seconds in times.items():
        n_steps = full_steps if tool == "proxydiag" else small[tool]
        scale = full_steps / n_steps
        note = (
            ""
            if scale == 1
            else f"measured on {N_TAGS * n_steps:,} points, time ×{scale:g} (linear)"
        )
        attr = "scalars" if form == "simple_value" else "tensors"
        snippet = _MEMORY.get(tool) or _MEMORY[f"{tool}-{form}"]
        code = snippet.format(p=str(paths[tool]), a=attr)
        # proxydiag's baseline includes numba's start-up (loading the cached machine code)
        warm = (
            f"proxydiag.read_run(Path({str(paths['EventFileLoader'])!r}))"
            if tool == "proxydiag"
            else ""
        )
        peak = peak_rss_mb(code, warm=warm)
        rows.append(
            Row(
                group=f"tensorboard {label} points ({form})",
                tool=tool,
                seconds=[s * scale for s in seconds],
                points=points,
                peak_mb=peak.mb,
                note=note
                + (
                    ""
                    if tool != "proxydiag"
                    else f"read_run: CRCs + decode + build_run; {peak.note}"
                ),
            )
        )
    return rows


def run(ctx: Context) -> list[Row]:
    return [*_group(ctx, "simple_value"), *_group(ctx, "tensor_f32")]
