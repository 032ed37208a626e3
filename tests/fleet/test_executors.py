"""The executors: outcomes in the items' order, one item's failure its own, and a local worker
process killed mid-task failing that item alone (ProcessPoolExecutor would lose the pool)."""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path

import pytest
from fleet_helpers import kill_on, sample_group

from proxydiag.errors import ConfigError
from proxydiag.fleet import make_executor
from proxydiag.fleet._local_pool import LocalPool
from proxydiag.fleet.executor import Serial
from proxydiag.fleet.ingest import ingest_sources
from proxydiag.fleet.tasks import ReadSpec, reader_name
from proxydiag.ingest import ReadContext, discover
from proxydiag.store import RunStore


def _square_or_fail(x: int) -> int:
    if x == 3:
        raise ValueError("three is bad")
    if x == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def test_the_local_pool_keeps_order_and_loses_only_the_killed_item() -> None:
    outcomes = list(LocalPool(workers=2).map(_square_or_fail, range(8)))
    assert [o.item for o in outcomes] == list(range(8))
    assert [o.value for o in outcomes if o.ok] == [0, 1, 4, 16, 36, 49]
    failed = {o.item: o.reason for o in outcomes if not o.ok}
    assert failed == {
        3: "ValueError: three is bad",
        5: "the worker process died (killed by signal 9) while working on this item",
    }


def test_serial_runs_in_process_and_says_each_failure_in_one_line() -> None:
    outcomes = list(Serial().map(int, ["1", "x\ny", "3"]))
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].reason == "ValueError: invalid literal for int() with base 10: 'x\\ny'"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "--workers 0"),
        ({"workers": 2, "ray": True}, "exclude each other"),
        ({"ray_address": "auto"}, "--ray-address needs --ray"),
    ],
)
def test_bad_executor_flags_are_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_executor(**kwargs)  # type: ignore[arg-type]


def test_a_killed_worker_fails_its_source_alone_and_the_rest_is_stored(tmp_path: Path) -> None:
    group = sample_group(tmp_path)
    work = [(reader_name(reader), str(src)) for reader, src in discover(group)]
    victim = "healthy-proxy-e8"
    store = RunStore(tmp_path / "store")
    result = ingest_sources(
        work,
        store=store,
        executor=LocalPool(workers=2),
        spec=ReadSpec(ReadContext()),
        skip_unchanged=True,
        task=partial(kill_on, victim),
    )
    [(_, source, reason)] = result.failures
    assert victim in source and "worker process died (killed by signal 9)" in reason
    names = sorted(store.runs()["name"].to_list())
    assert len(work) == 4 and len(names) == 3 and victim not in names
