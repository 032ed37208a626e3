"""``--ray``: a local Ray (started once for the module) gives ``--workers 1``'s store and
output, a bad source is one line, and a worker killed mid-task is retried by Ray without a
run stored twice. Skips, saying why, where Ray cannot start; fails instead under CI=true."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import fleet_helpers
import pytest
from fleet_helpers import kill_once, run_cli, sample_group, store_state

from proxydiag.fleet._ray_pool import RayPool
from proxydiag.fleet.ingest import ingest_sources
from proxydiag.fleet.tasks import ReadSpec, reader_name
from proxydiag.ingest import ReadContext, discover
from proxydiag.store import RunStore


def _unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"Ray is required under CI=true (install proxydiag[ray]): {why}")
    pytest.skip(f"Ray cannot start here: {why}")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """One local Ray for the module (starting one takes 10-20 s)."""
    try:
        import ray
    except ImportError as exc:
        _unavailable(str(exc))
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # whatever stops Ray from starting, said in the skip
        _unavailable(f"{type(exc).__name__}: {exc}")
    # the helpers travel to the workers by value (tests/ is not on a Ray worker's path)
    ray.cloudpickle.register_pickle_by_value(fleet_helpers)
    yield ray
    ray.shutdown()


def _fleet(
    store: Path,
    group: Path,
    flags: list[str],
    capsys: pytest.CaptureFixture[str],
) -> dict[str, tuple[int, str, str]]:
    at = ["--store", str(store), *flags]
    return {
        "ingest": run_cli(["ingest", str(group), *at], capsys),
        "diagnose": run_cli(["diagnose", "--all", "-f", "json", *at], capsys),
        "compare": run_cli(["compare", *at], capsys),
        "runs": run_cli(["runs", "--store", str(store), "-f", "json"], capsys),
    }


def test_ray_gives_one_workers_store_and_output(
    ray_local: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = sample_group(tmp_path)
    one = _fleet(tmp_path / "one", group, ["--workers", "1"], capsys)
    on_ray = _fleet(tmp_path / "ray", group, ["--ray"], capsys)
    for command, (code, out, _) in one.items():
        assert code == 0, (command, one[command])
        said = out.replace(str(tmp_path / "one"), str(tmp_path / "ray"))
        assert (code, said) == on_ray[command][:2], command
    assert len(one["compare"][1].splitlines()) == 2
    assert store_state(tmp_path / "one") == store_state(tmp_path / "ray")


def test_a_bad_source_on_ray_is_one_line_and_the_others_are_kept(
    ray_local: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = sample_group(tmp_path)
    bad = group / "healthy-proxy-e16" / "metrics.csv"
    bad.write_text("step,loss\n1,0.5\n2,abc\n")
    code, out, err = run_cli(
        ["ingest", str(group), "--store", str(tmp_path / "s"), "--ray"], capsys
    )
    assert code == 2 and "3 run(s) stored" in out
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: {bad}") and "'abc'" in line


def test_a_killed_ray_worker_is_retried_and_its_runs_stored_once(
    ray_local: Any, tmp_path: Path
) -> None:
    group = sample_group(tmp_path)
    work = [(reader_name(reader), str(src)) for reader, src in discover(group)]
    store = RunStore(tmp_path / "store")
    result = ingest_sources(
        work,
        store=store,
        executor=RayPool(),
        spec=ReadSpec(ReadContext()),
        skip_unchanged=True,
        task=partial(kill_once, "healthy-proxy-e8", str(tmp_path)),
    )
    assert (tmp_path / "tried").exists()  # the worker reading it was killed once
    assert result.failures == [] and len(result.stored) == len(set(result.stored)) == 4
    assert sorted(store.runs()["run"].to_list()) == sorted(result.stored)
