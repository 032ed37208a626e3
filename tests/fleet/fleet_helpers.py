"""What the fleet tests share: running the CLI in-process, comparing two stores, and work-item
functions a worker can import (they kill their own process, or fail, on purpose)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from proxydiag.cli import main
from proxydiag.fleet.tasks import Read, ReadSpec, SourceItem, read_source, reader_name
from proxydiag.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_RUNS = ROOT / "sample_runs"
#: one group of the sample runs: 2 full runs and 2 proxies in MLflow, JSONL and CSV files (its
#: TensorBoard runs are left out: each new worker process would load the compiled TensorBoard
#: decoder first, seconds on a loaded 2-core machine)
GROUP = "healthy"
FAST = ("healthy-full-s1", "healthy-full-s2", "healthy-proxy-e16", "healthy-proxy-e8")


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``proxydiag ARGS`` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def sample_group(tmp_path: Path, runs: tuple[str, ...] = FAST) -> Path:
    """A copy of runs of the sample group (tests may change its files)."""
    target = tmp_path / "sources" / GROUP
    for run in runs:
        shutil.copytree(SAMPLE_RUNS / GROUP / run, target / run)
    return target


def store_state(store: Path) -> dict[str, object]:
    """What makes two stores the same: run ids with their frames, and catalog rows without
    ingest times (the issue's definition of identical stores)."""
    runs = RunStore(store)
    table = runs.runs().drop("ingested_at").sort("run")
    frames = {
        rid: runs.get(rid).frame.sort("metric", "step").to_dicts() for rid in table["run"].to_list()
    }
    return {"catalog": table.to_dicts(), "frames": json.dumps(frames, default=str)}


def kill_on(source_part: str, spec: ReadSpec, item: SourceItem) -> Read:
    """:func:`read_source`, except that the worker reading a source whose path contains
    ``source_part`` kills its own process (SIGKILL: no exception, no cleanup)."""
    if source_part in item.source:
        os.kill(os.getpid(), signal.SIGKILL)
    return read_source(spec, item)


def kill_once(source_part: str, marker_dir: str, spec: ReadSpec, item: SourceItem) -> Read:
    """:func:`read_source`, except that the first attempt at a source whose path contains
    ``source_part`` kills its worker process (a marker file says it was tried): Ray must run
    it again."""
    marker = Path(marker_dir) / "tried"
    if source_part in item.source and not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return read_source(spec, item)


def ingest_quietly(group: Path, store: Path) -> None:
    """Ingest ``group`` into ``store`` in this process (for module-scoped fixtures)."""
    from proxydiag.fleet.executor import Serial
    from proxydiag.fleet.ingest import ingest_sources
    from proxydiag.ingest import ReadContext, discover

    work = [(reader_name(reader), str(src)) for reader, src in discover(group)]
    result = ingest_sources(
        work,
        store=RunStore(store),
        executor=Serial(),
        spec=ReadSpec(ReadContext()),
        skip_unchanged=False,
    )
    assert not result.failures, result.failures
