"""``proxydiag.testing.mlflow_server.start``: the one way tests, benchmarks and docs run a server.

It answers on 127.0.0.1, runs in its own process group, and stopping it ends every process of
that group (the workers it forked included); a server that cannot start is an MlflowError
naming the URI and the log's tail, and leaves nothing running.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from mlflow_fixtures import QUIET_ENV

from proxydiag.errors import MlflowError
from proxydiag.testing.mlflow_server import start, wait_healthy

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs Linux /proc"),
]


def _group(pgid: int) -> set[int]:
    """The live (not zombie) processes of process group ``pgid`` (Linux /proc)."""
    members = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.add(int(entry.name))
    return members


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in QUIET_ENV.items():
        monkeypatch.setenv(key, value)


def test_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    with start(tmp_path, workers=2) as server:
        assert server.uri.startswith("http://127.0.0.1:")
        assert os.getpgid(server.proc.pid) == server.proc.pid != os.getpgid(0)
        members = _group(server.proc.pid)
        assert len(members) >= 2, members  # the server and the workers it forked
        assert members <= _running_in(tmp_path)
    assert server.proc.poll() is not None
    deadline = time.monotonic() + 10.0
    while _group(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group(server.proc.pid) and not _running_in(tmp_path)
    assert not wait_healthy(server.uri, timeout_s=0.0)


def test_a_server_that_does_not_answer_in_time_is_one_error_and_is_stopped(
    tmp_path: Path,
) -> None:
    with pytest.raises(MlflowError) as info:
        start(tmp_path, timeout_s=0.0)  # mlflow takes seconds to import: not up yet
    message = str(info.value)
    assert message.startswith("http://127.0.0.1:") and "did not answer within 0 s" in message
    assert f"{tmp_path / 'server.log'} ends:" in message and "\n" not in message
    assert not _running_in(tmp_path)


def _running_in(root: Path) -> set[int]:
    """Live processes whose working directory is ``root`` (the server runs there)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")) == root:
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def test_relative_paths_mean_the_callers_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server runs in ``root``: a relative ``db`` is still the caller's file, not a new
    empty store beside the server (the benchmark's tracking-server run was not found)."""
    from mlflow import MlflowClient

    MlflowClient(f"sqlite:///{tmp_path / 'src.db'}").create_experiment("mine")
    monkeypatch.chdir(tmp_path)
    with start(Path("srv"), db=Path("src.db")) as server:
        assert MlflowClient(server.uri).get_experiment_by_name("mine") is not None
        assert server.db == tmp_path / "src.db"


def test_stop_ends_the_workers_of_a_parent_that_died(tmp_path: Path) -> None:
    import signal

    server = start(tmp_path, workers=2)
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=10)
    server.stop()  # the workers outlive their parent: the group is still signalled
    deadline = time.monotonic() + 10.0
    while _group(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group(server.proc.pid)
