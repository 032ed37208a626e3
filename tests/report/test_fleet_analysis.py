"""``load_fleet(analyse=True)`` on a store that lacks results: each run diagnosed at most once,
one group's runs in memory at a time (real diagnose and compare, counted)."""

from __future__ import annotations

import gc
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _report_data import make_comparison, make_diagnosis, make_run
from _spies import recorded

from proxydiag.diagnose import api as diagnose_api
from proxydiag.report._fleet import load_fleet
from proxydiag.run import Run
from proxydiag.store import RunStore

GROUPS = ("g1", "g2")
N_PROXIES = 3


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two groups of two full seeds (diagnoses stored) and three proxies (the first diagnosed;
    only g1's first compared), and one run in no group."""
    path = tmp_path_factory.mktemp("fleet") / "store"
    store = RunStore(path)
    for g, group in enumerate(GROUPS):
        fulls = [
            make_run(f"{group}-full-s{s}", seed=10 * g + s, n_steps=200, onset=120 + s)
            for s in range(2)
        ]
        proxies = [
            make_run(
                f"{group}-p{i}",
                seed=10 * g + 5 + i,
                n_steps=200,
                onset=125,
                role="proxy",
                experts_kept=0.5 / (i + 1),
            )
            for i in range(N_PROXIES)
        ]
        for run in (*fulls, *proxies):
            run.attrs["group"] = group
            store.put(run)
        for run in fulls:
            store.put_diagnosis(make_diagnosis(run, onset=run.last_step))
        store.put_diagnosis(make_diagnosis(proxies[0], onset=None))
        if group == "g1":
            store.put_comparison(make_comparison(fulls, proxies[0]))
    lone = make_run("lone", seed=99, n_steps=200)
    lone.attrs["group"] = None
    store.put(lone)
    return path


def test_each_run_is_diagnosed_at_most_once(store_dir: Path, monkeypatch: Any) -> None:
    # the fleet and compare (for a diagnosis it is not given) both look it up here at call time
    diagnosed = recorded(monkeypatch, diagnose_api, "diagnose")
    fleet = load_fleet(RunStore(store_dir))
    calls = Counter(run.name for (run,) in diagnosed)
    assert fleet.proxies.height == len(GROUPS) * N_PROXIES
    assert fleet.proxies["fidelity"].null_count() == 0
    assert fleet.runs["label"].null_count() == 0
    # all but g1-p0 (diagnosed and compared in the store) are diagnosed: full runs as compare's
    # input (once, not once per proxy of their group), proxies to be compared, the rest for lack
    # of a stored diagnosis
    assert calls == {name: 1 for name in fleet.runs["name"].to_list() if name != "g1-p0"}


def test_one_group_in_memory_at_a_time(store_dir: Path, monkeypatch: Any) -> None:
    store = RunStore(store_dir)
    runs = store.runs()
    group_of = dict(zip(runs["run"], runs["group"], strict=True))
    needed = sorted(runs.filter(runs["name"] != "g1-p0")["run"])  # g1-p0 has all its results
    loaded: list[tuple[str, weakref.ref[Run]]] = []  # (run id, run) for every load
    strays: list[tuple[str, str]] = []  # (loaded run, live run of another group)
    peak = 0
    real_get = store.get

    def get(run_id: str) -> Run:
        nonlocal peak
        gc.collect()
        live = [rid for rid, ref in loaded if ref() is not None]
        strays.extend(
            (run_id, rid)
            for rid in live
            if group_of[rid] is None or group_of[rid] != group_of[run_id]
        )
        run = real_get(run_id)
        loaded.append((run_id, weakref.ref(run)))
        peak = max(peak, len(live) + 1)
        return run

    monkeypatch.setattr(store, "get", get)
    load_fleet(store)
    assert sorted(rid for rid, _ in loaded) == needed  # each run loaded once
    assert strays == []
    # a group's full runs stay while its proxies load, one proxy at a time
    assert peak == 2 + 1


def test_every_view_takes_a_groups_full_runs_in_one_order(tmp_path: Path, monkeypatch: Any) -> None:
    """compare --store, report --group and the dashboard take the same reference (the first
    full run): by seed (none last), then name, whatever order the runs were ingested in."""
    from proxydiag.fidelity import api as fidelity_api
    from proxydiag.fleet.analyse import proxy_items
    from proxydiag.report.jobs import group_runs

    store = RunStore(tmp_path / "store")
    runs = [
        make_run("f-late", seed=2, n_steps=120),
        make_run("f-none", seed=0, n_steps=120),
        make_run("f-b", seed=1, n_steps=120),
        make_run("f-a", seed=1, n_steps=120),
        make_run("p", seed=5, n_steps=120, role="proxy", experts_kept=0.5),
    ]
    runs[1].attrs["seed"] = None
    ids = {}
    for run in runs:
        store.put(run)
        ids[run.name] = run.id
    order = tuple(ids[n] for n in ("f-a", "f-b", "f-late", "f-none"))
    assert proxy_items(store)[0].full == order
    assert tuple(r.id for r in group_runs(store.path, "g1")[0]) == order
    compared = recorded(monkeypatch, fidelity_api, "compare")
    load_fleet(store, analyse=True)
    assert [tuple(r.id for r in full) for full, _ in compared] == [order]
