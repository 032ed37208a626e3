"""Batched commits: a driver killed between batches (or inside one) loses at most the batch
it was gathering, catalog readers never see part of a batch, and a re-run completes the store
to what one uninterrupted ingest gives."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest
from fleet_helpers import run_cli, sample_group, store_state

from proxydiag.fleet._batch import Batching
from proxydiag.fleet.executor import Serial
from proxydiag.fleet.ingest import ingest_sources
from proxydiag.fleet.tasks import Read, ReadSpec, SourceItem, read_source, reader_name
from proxydiag.ingest import ReadContext, discover
from proxydiag.store import STAGING, RunStore
from tests._paths import ROOT

pytestmark = pytest.mark.timeout(180)

N_SOURCES = 10
BATCH = 3

DRIVER = """
import os, signal, sys, time
from pathlib import Path
from proxydiag.fleet._batch import Batching
from proxydiag.fleet.executor import Serial
from proxydiag.fleet.ingest import ingest_sources
from proxydiag.fleet.tasks import ReadSpec, read_source, reader_name
from proxydiag.ingest import ReadContext, discover
from proxydiag.store import RunStore
from proxydiag.store import _catalog

src, dst, batch, die_in_batch = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
calls = [0]
upsert = _catalog.upsert_rows
def upsert_or_die(con, rows):
    calls[0] += 1
    if calls[0] == die_in_batch:  # files moved and journalled, catalog not yet written
        os.kill(os.getpid(), signal.SIGKILL)
    return upsert(con, rows)
_catalog.upsert_rows = upsert_or_die
def slow(spec, item):
    time.sleep(0.2)  # a read that outlasts the parent's polling of the catalog
    return read_source(spec, item)
from proxydiag.fleet.digest import config_digest, file_digest
work = [(reader_name(r), str(s)) for r, s in discover(src)]
spec = ReadSpec(ReadContext(), config_digest=config_digest(file_digest(None), None, None, None))
ingest_sources(work, store=RunStore(dst), executor=Serial(), spec=spec,  # as `ingest` reads
               skip_unchanged=True, task=slow, batching=Batching(runs=batch, seconds=600))
"""


def _sources(folder: Path) -> Path:
    folder.mkdir()
    for i in range(N_SOURCES):
        steps = pl.int_range(0, 50 + i, eager=True)
        pl.DataFrame(
            {"step": steps, "loss": steps / 100 + i, "grad_norm": steps * 0.0 + i}
        ).with_columns(
            pl.when(pl.col("step") == 7).then(float("nan")).otherwise(pl.col("loss")).alias("loss")
        ).write_csv(folder / f"r{i:02d}.csv")
    return folder


def _drive(src: Path, dst: Path, *, die_in_batch: int) -> tuple[set[int], int]:
    """Run the driver in a process; SIGKILL it once a batch is committed (or let it kill
    itself inside batch ``die_in_batch``). Returns the catalog sizes seen while it ran and
    its exit status."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(DRIVER),
            str(src),
            str(dst),
            str(BATCH),
            str(die_in_batch),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: set[int] = set()
    store = RunStore(dst)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            height = store.runs().height if store.db.exists() else 0
            seen.add(height)
            if die_in_batch == 0 and height >= BATCH:
                os.kill(proc.pid, signal.SIGKILL)  # between two batches' commits
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None and die_in_batch != 0:
            os.kill(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, stderr
    return seen, proc.returncode


@pytest.mark.parametrize("die_in_batch", [0, 2], ids=["between-batches", "inside-a-batch"])
def test_a_killed_driver_loses_at_most_one_batch_and_a_rerun_completes_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], die_in_batch: int
) -> None:
    src = _sources(tmp_path / "src")
    dst = tmp_path / "store"
    seen, _ = _drive(src, dst, die_in_batch=die_in_batch)
    assert all(h % BATCH == 0 for h in seen), seen  # never part of a batch
    store = RunStore(dst)
    with store.writing():  # the next writer rolls a journalled batch forward
        pass
    kept = store.runs().height
    # killed between batches: 1+ batches kept; killed inside the second: both batches kept
    assert (BATCH <= kept < N_SOURCES) if die_in_batch == 0 else kept == 2 * BATCH
    assert kept % BATCH == 0
    for rid in store.runs()["run"]:
        assert store.get(rid).frame.height > 0
    code, out, err = run_cli(["ingest", str(src), "--store", str(dst)], capsys)
    assert code == 0
    assert f"{kept} source(s) unchanged" in err  # content digests say what is done
    assert f"{N_SOURCES - kept} run(s) stored" in out
    code, _, _ = run_cli(["ingest", str(src), "--store", str(tmp_path / "clean")], capsys)
    assert code == 0
    assert store_state(dst) == store_state(tmp_path / "clean")
    assert list((dst / STAGING).iterdir()) == []  # the dead driver's staging is gone
    assert not list((dst / "runs").glob(".*"))


def _unstaged(spec: ReadSpec, item: SourceItem) -> Read:
    """A worker that cannot see the store: it sends its runs back instead of staging them."""
    return read_source(dataclasses.replace(spec, stage=None), item)


def test_runs_sent_back_by_workers_give_the_same_store_as_runs_staged_by_them(
    tmp_path: Path,
) -> None:
    group = sample_group(tmp_path)
    work = [(reader_name(reader), str(src)) for reader, src in discover(group)]
    for name, task in (("staged", read_source), ("sent", _unstaged)):
        result = ingest_sources(
            work,
            store=RunStore(tmp_path / name),
            executor=Serial(),
            spec=ReadSpec(ReadContext()),
            skip_unchanged=True,
            task=task,
            batching=Batching(runs=3),
        )
        assert not result.failures and len(result.stored) == len(work)
    assert store_state(tmp_path / "staged") == store_state(tmp_path / "sent")
