"""The store across real processes: a second writer, readers during a write, SIGKILL mid-ingest."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

from proxydiag.cli import main
from proxydiag.errors import StoreLockedError
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.store import RunStore
from tests._paths import ROOT

pytestmark = pytest.mark.timeout(120)


def run_of(index: int, n_points: int = 2000) -> Run:
    """Run ``index``: value = index + step / 1000 (so any reader can check it)."""
    steps = list(range(n_points))
    raw = pl.DataFrame(
        {"step": steps, "key": ["loss"] * n_points, "value": [index + s / 1000 for s in steps]}
    )
    return build_run(raw, name=f"run{index}", source=f"/src/run{index}", fmt="csv")


def write_csvs(folder: Path, count: int, n_rows: int = 3000) -> list[Path]:
    folder.mkdir()
    paths = []
    for i in range(count):
        frame = pl.DataFrame({"step": range(n_rows)}).with_columns(
            (pl.col("step") / 1000 + i).alias("loss"), (pl.col("step") * 0 + i).alias("idx")
        )
        path = folder / f"r{i:03d}.csv"
        frame.write_csv(path)
        paths.append(path)
    return paths


def spawn(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)  # waits, and closes the pipes


def check_complete(store: RunStore) -> int:
    """Every listed run reads back whole and exact; returns how many there are."""
    listed = store.runs()
    for row in listed.iter_rows(named=True):
        run = store.get(row["run"])
        assert run.frame.height == row["n_points"]
        loss = run.frame.filter(pl.col("metric") == "loss").sort("step")
        index = round(loss["value"][0] - loss["step"][0] / 1000)
        expected = [index + s / 1000 for s in loss["step"].to_list()]
        assert loss["value"].to_list() == pytest.approx(expected, rel=0, abs=1e-12)
    return listed.height


def test_second_writer_gets_a_clear_message(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    holder = spawn(f"""
        import time
        from proxydiag.store import RunStore
        with RunStore({str(store_dir)!r}).writing():
            print("locked", flush=True)
            time.sleep(60)
    """)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        store = RunStore(store_dir, lock_timeout_s=0.3)
        with pytest.raises(StoreLockedError) as info:
            store.put(run_of(1))
        assert str(info.value) == (
            f"store {store_dir} is in use by PID {holder.pid} on host {socket.gethostname()};"
            " retry or use another --store"
        )
        assert store.runs().height == 0  # readers never wait for the writer lock
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "proxydiag",
                "ingest",
                str(write_csvs(tmp_path / "c", 1)[0]),
                "--store",
                str(store_dir),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PROXYDIAG_LOCK_TIMEOUT_S": "0.3"},
        )
        assert cli.returncode == 2
        assert cli.stderr.strip().splitlines() == [
            f"error: store {store_dir} is in use by PID {holder.pid} on host "
            f"{socket.gethostname()}; retry or use another --store"
        ]
    finally:
        stop(holder)  # SIGKILL: the kernel releases the lock
    assert RunStore(store_dir, lock_timeout_s=5).put(run_of(1)) == run_of(1).id


def test_readers_work_while_another_process_writes(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    writer = spawn(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        from test_store_concurrency import run_of
        from proxydiag.store import RunStore
        store = RunStore({str(store_dir)!r})
        for i in range(12):
            store.put(run_of(i, 500))
        print("done", flush=True)
    """)
    store = RunStore(store_dir)
    reads, seen = 0, set()
    try:
        while writer.poll() is None:
            count = check_complete(store)
            seen.add(count)
            reads += 1
            time.sleep(0.05)  # a reader polling, not a busy loop starving the writer
        assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
    finally:
        stop(writer)
    assert check_complete(store) == 12
    assert reads >= 3 and len(seen) >= 2  # we did read while the store was growing


def test_sigkill_mid_ingest_leaves_the_store_readable_and_intact(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    store = RunStore(store_dir)
    before = [store.put(run_of(100 + i)) for i in range(3)]
    sources = write_csvs(tmp_path / "csvs", 16, n_rows=500)
    for delay_s in (0.0,):
        proc = spawn(f"""
            import time
            from proxydiag.ingest import read_run
            from proxydiag.store import RunStore
            store = RunStore({str(store_dir)!r})
            for source in {[str(p) for p in sources]!r}:
                store.put(read_run(source))
                time.sleep(0.05)  # an ingest that outlasts the poll below (reads got fast)
        """)
        deadline = time.monotonic() + 60
        while store.runs().height < 3 + 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        time.sleep(delay_s)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        listed = store.runs()
        assert 3 < listed.height < 3 + 16, "kill landed mid-way"
        assert set(before) <= set(listed["run"].to_list())
        assert check_complete(store) == listed.height
        assert store.scan().select(pl.len()).collect().item() == listed["n_points"].sum()
    with pytest.raises(SystemExit) as done:
        main(["ingest", *map(str, sources), "--store", str(store_dir)])
    assert done.value.code == 0
    assert check_complete(store) == 3 + 16  # re-ingest completed it, no duplicates
    assert not list((store_dir / "runs").glob(".*.tmp"))
