"""A fleet for the dashboard tests: a real :class:`RunStore` in a directory, filled with real
runs."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import polars as pl
from _report_data import make_comparison, make_diagnosis, make_run

from proxydiag.fidelity.result import FaultComparison
from proxydiag.report._fleet import Fleet, load_fleet
from proxydiag.store import RunStore

PROXIES = (
    ("p50", 0.5, 0.55, 0.93, "faithful"),
    ("p25", 0.25, 0.3, 0.81, "partial"),
    ("p12", 0.125, 0.17, 0.35, "unfaithful"),
)


def fleet_store(path: Path, *, name: str = "full") -> RunStore:
    """One full run and three proxies (group g1) in a store at ``path``; the full run and the
    first proxy are diagnosed, every proxy is compared (fidelity and verdict from ``PROXIES``)."""
    store = RunStore(path)
    full = make_run(name, seed=0, n_steps=400, onset=240)
    proxies = [
        make_run(p, seed=1 + i, n_steps=400, role="proxy", experts_kept=k)
        for i, (p, k, *_rest) in enumerate(PROXIES)
    ]
    for run in (full, *proxies):
        store.put(run)
    store.put_diagnosis(make_diagnosis(full, onset=None))
    store.put_diagnosis(make_diagnosis(proxies[0], onset=240))
    for proxy, (*_, fidelity, verdict) in zip(proxies, PROXIES, strict=True):
        faults = FaultComparison(
            {"label": "loss_divergence"},
            {"label": "healthy"},
            None,
            None,
            reproduced=verdict != "unfaithful",
        )
        store.put_comparison(
            dataclasses.replace(
                make_comparison([full], proxy), fidelity=fidelity, verdict=verdict, faults=faults
            )
        )
    return store


def fleet_with(*, name: str = "full") -> Fleet:
    """Four proxies in two groups (one from a second fleet), for rendering tests."""
    with tempfile.TemporaryDirectory() as tmp:  # the fleet is read whole: the store may go
        fleet = load_fleet(fleet_store(Path(tmp) / "store", name=name), analyse=False)
    extra = fleet.proxies.head(1).with_columns(
        pl.lit("g2").alias("group"), pl.lit(0.6).alias("fidelity")
    )
    return Fleet(fleet.runs, pl.concat([fleet.proxies, extra]), fleet.store)
