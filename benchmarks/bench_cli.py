"""The command line's start-up: ``proxydiag --help`` and ``diagnose`` of a small file, as whole
processes, against the floor of any polars tool (``python -c "import polars, numpy"``).

A linter of logs run per file in CI or a loop pays the start-up every time; the targets are
``--help`` at most 1x the floor (it imports no analysis library) and ``diagnose`` of a 400-step
JSONL at most 2x. The commands alternate in one run (a loaded machine slows them alike).

Every process reads compiled bytecode, as an installed package does (pip writes it at install,
and the floor's polars and numpy have theirs): with ``PYTHONDONTWRITEBYTECODE=1`` in the
environment a checkout's modules would be compiled again at every start (~0.13 s of CPU for
``diagnose``), so the children get a bytecode cache of their own under ``benchmarks/.cache``
instead, filled by the first (untimed) run. One more row shows ``diagnose`` compiling its
modules at every start, for a checkout run that way.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import Context, Row, alternate


def small_run(path: Path, steps: int) -> Path:
    """A healthy JSONL run of ``steps`` steps and six metrics (written once, cached)."""
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for step in range(steps):
            record = {
                "step": step,
                "loss": 2.0 - step / steps + 0.02 * rng.standard_normal(),
                "grad_norm": 1.0 + 0.1 * abs(rng.standard_normal()),
                "lr": 1e-5,
                "reward": step / steps + 0.05 * rng.standard_normal(),
                "entropy": 1.0 + 0.01 * rng.standard_normal(),
                "kl": 1e-3 * (1 + abs(rng.standard_normal())),
            }
            f.write(json.dumps(record) + "\n")
    return path


def _process(cpu: list[float], env: dict[str, str], *args: str) -> None:
    """Run the command; append its CPU seconds (user + system of the child) to ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, check=True, capture_output=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def _environments(cache: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(bytecode read from a cache, as installed; modules compiled at every start)."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
    installed = {**base, "PYTHONPYCACHEPREFIX": str(cache / "pycache")}
    compiling = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
    compiling.pop("PYTHONPYCACHEPREFIX", None)
    return installed, compiling


def run(ctx: Context) -> list[Row]:
    run_file = small_run(ctx.cache / "cli" / "small-400.jsonl", 400)
    python = sys.executable
    cli = [python, "-m", "proxydiag"]
    env, compiling = _environments(ctx.cache / "cli")
    cpu: dict[str, list[float]] = {"floor": [], "help": [], "diagnose": [], "compiling": []}
    diagnose = [*cli, "diagnose", str(run_file)]
    times = alternate(
        {
            "floor": lambda: _process(cpu["floor"], env, python, "-c", "import polars, numpy"),
            "help": lambda: _process(cpu["help"], env, *cli, "--help"),
            "diagnose": lambda: _process(cpu["diagnose"], env, *diagnose),
            "compiling": lambda: _process(cpu["compiling"], compiling, *diagnose),
        },
        repeat=ctx.size(ctx.repeat * 2, 1),
    )
    # CPU seconds hold on a machine others share, where wall time does not (the first run of
    # each, which fills the bytecode cache, is not counted)
    used = {k: statistics.median(v[1:]) for k, v in cpu.items()}

    def note(what: str, key: str) -> str:
        return f"{what}; CPU {used[key]:.2f} s, {used[key] / used['floor']:.1f}× the floor's"

    floor = Row(
        "CLI start-up: --help",
        'python -c "import polars, numpy"',
        times["floor"],
        note=f"the floor of any polars tool; CPU {used['floor']:.2f} s",
    )
    return [
        Row(
            "CLI start-up: --help",
            "proxydiag",
            times["help"],
            note=note("target ≤ 1× the floor", "help"),
        ),
        floor,
        Row(
            "CLI start-up: diagnose 400 steps × 6 metrics (JSONL)",
            "proxydiag",
            times["diagnose"],
            points=2400,
            note=note("target ≤ 2× the floor", "diagnose"),
        ),
        Row(
            "CLI start-up: diagnose 400 steps × 6 metrics (JSONL)",
            'python -c "import polars, numpy"',
            times["floor"],
            note="the floor of any polars tool",
        ),
        Row(
            "CLI start-up: diagnose 400 steps × 6 metrics (JSONL)",
            "proxydiag, modules compiled at every start (PYTHONDONTWRITEBYTECODE=1)",
            times["compiling"],
            points=2400,
            note=note("a checkout run without bytecode", "compiling"),
        ),
    ]
