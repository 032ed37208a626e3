"""``make bench``: run every benchmarks/bench_*.py, print medians, points/s, memory and ratios.

``--smoke`` runs tiny inputs once (CI keeps the benchmarks from rotting); ``--only NAME``
runs one module; ``--write`` rewrites benchmarks/RESULTS.md: the table with its date, commit
and machine (what the rows mean is docs/benchmarks.md).

Each module runs in a process of its own (the tools it compares alternate within it): a
module's reads allocate on the pages earlier modules left behind, and a 10^6-point Parquet
read went from 1.7x polars on its own to 1.9x after the fleet and MLflow modules.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from benchmarks.common import Context, Row

HERE = Path(__file__).parent
PACKAGES = (
    "proxydiag",
    "polars",
    "numpy",
    "duckdb",
    "tensorboard",
    "tbparse",
    "mlflow",
    "google-crc32c",
)


def machine_line() -> str:
    versions = []
    for name in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions.append(f"{name} {metadata.version(name)}")
    return (
        f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        + ", ".join(versions)
    )


def table(rows: list[Row]) -> str:
    lines = [
        "| group | tool | median s | points/s | peak MB | vs proxydiag | note |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    by_group: dict[str, list[Row]] = {}
    for row in rows:
        by_group.setdefault(row.group, []).append(row)
    for group, grows in by_group.items():
        ours = next((r for r in grows if r.tool == "proxydiag"), None)
        for r in grows:
            ratio = f"{r.median / ours.median:.1f}× slower" if ours and r is not ours else ""
            if ours and r is not ours and r.median < ours.median:
                ratio = f"{ours.median / r.median:.1f}× faster"
            pps = f"{r.points_per_s:,.0f}" if r.points else ""
            peak = f"{r.peak_mb:.0f}" if r.peak_mb is not None else ""
            lines.append(
                f"| {group} | {r.tool} | {r.median:.3f} | {pps} | {peak} | {ratio} | {r.note} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--module", help=argparse.SUPPRESS)  # one module, in this process
    parser.add_argument("--rows", type=Path, help=argparse.SUPPRESS)  # its rows, as JSON
    args = parser.parse_args(argv)
    ctx = Context(smoke=args.smoke, repeat=1 if args.smoke else args.repeat)
    ctx.cache.mkdir(parents=True, exist_ok=True)
    if args.module:
        found = importlib.import_module(f"benchmarks.{args.module}").run(ctx)
        args.rows.write_text(json.dumps([dataclasses.asdict(r) for r in found]))
        return 0
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if args.only:
        modules = [m for m in modules if any(o in m for o in args.only)]
    rows: list[Row] = []
    print(machine_line(), flush=True)
    for name in modules:
        print(f"-- {name}", file=sys.stderr, flush=True)
        rows.extend(_in_own_process(name, smoke=args.smoke, repeat=args.repeat))
    text = table(rows)
    print(text)
    if args.write and not args.smoke:
        (HERE / "RESULTS.md").write_text(results_page(text), encoding="utf-8")
    return 0


def results_page(table_text: str) -> str:
    """benchmarks/RESULTS.md: the current table, its date, commit and machine, and a pointer."""
    stamp = dt.date.today().isoformat()
    return (
        f"# Benchmark results\n\n{stamp}, commit {commit()} — {machine_line()}\n\n{table_text}\n\n"
        "`python -m benchmarks.run --write` rewrites this file. What each row measures and how to "
        "read it: [docs/benchmarks.md](../docs/benchmarks.md).\n"
    )


def commit() -> str:
    """The measured tree's commit (``-dirty`` when it has uncommitted changes), or ``unknown``."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _in_own_process(module: str, *, smoke: bool, repeat: int) -> list[Row]:
    """The rows of one benchmark module, run in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--module",
            module,
            "--rows",
            str(out),
            "--repeat",
            str(repeat),
            *(["--smoke"] if smoke else []),
        ]
        subprocess.run(cmd, check=True, cwd=HERE.parent)
        return [Row(**r) for r in json.loads(out.read_text())]


if __name__ == "__main__":
    sys.exit(main())
