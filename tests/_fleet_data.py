"""A fleet for the dashboard tests: an in-memory store with the interface of the brief."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
from _report_data import make_run

from proxydiag.report.fleet import Fleet, load_fleet
from proxydiag.run import Run

PROXIES = (("p50", 0.5, 0.55, 0.93, "faithful"), ("p25", 0.25, 0.3, 0.81, "partial"),
           ("p12", 0.125, 0.17, 0.35, "unfaithful"))


class FakeStore:
    """The store interface of the brief, over in-memory runs (the real one is tested below)."""

    def __init__(self, runs: list[Run], *, comparisons: list[dict[str, Any]]) -> None:
        self._runs = {r.id: r for r in runs}
        self._comparisons = comparisons
        self.path = Path("/fake/store")

    def runs(self) -> pl.DataFrame:
        return pl.DataFrame([{
            "run": r.id, "name": r.name, "role": r.attrs["role"], "group": r.attrs["group"],
            "seed": r.attrs["seed"], "experts_kept": r.attrs["experts_kept"],
            "cost_per_step": r.attrs["cost_per_step"], "precision": "bf16",
            "n_points": r.frame.height, "first_step": r.first_step, "last_step": r.last_step,
        } for r in self._runs.values()])

    def get(self, run_id: str) -> Run:
        return self._runs[run_id]

    def diagnoses(self) -> pl.DataFrame:
        ids = list(self._runs)
        return pl.DataFrame({"run": ids[:2], "label": ["healthy", "loss_divergence"],
                             "onset_step": [None, 240], "confidence": [0.9, 0.8],
                             "json": ["{}", "{}"], "mlflow_synced": [False, False]},
                            schema_overrides={"onset_step": pl.Int64})

    def comparisons(self) -> pl.DataFrame:
        return pl.DataFrame({
            "proxy_run": [c["proxy_run"] for c in self._comparisons],
            "full_runs": [", ".join(c["full_runs"]) for c in self._comparisons],
            "fidelity": [c["fidelity"] for c in self._comparisons],
            "verdict": [c["verdict"] for c in self._comparisons],
            "json": [json.dumps(c) for c in self._comparisons],
            "mlflow_synced": [False] * len(self._comparisons),
        })

    def scan(self) -> pl.LazyFrame:
        return pl.concat([r.frame for r in self._runs.values()]).lazy()


def fake_store(*, name: str = "full") -> FakeStore:
    full = make_run(name, seed=0, n_steps=400, onset=240)
    proxies = [make_run(p, seed=1 + i, n_steps=400, role="proxy", experts_kept=k)
               for i, (p, k, *_rest) in enumerate(PROXIES)]
    comps = [{"proxy_run": r.id, "full_runs": [full.id], "fidelity": f, "verdict": v,
              "faults": {"full": {"label": "loss_divergence"}, "proxy": {"label": "healthy"},
                         "reproduced": v != "unfaithful"}}
             for r, (_, _, _, f, v) in zip(proxies, PROXIES, strict=True)]
    return FakeStore([full, *proxies], comparisons=comps)


def fleet_with(*, name: str = "full") -> Fleet:
    """Four proxies in two groups (one from a second fleet), for rendering tests."""
    fleet = load_fleet(fake_store(name=name), analyse=False)  # type: ignore[arg-type]
    extra = fleet.proxies.head(1).with_columns(pl.lit("g2").alias("group"),
                                               pl.lit(0.6).alias("fidelity"))
    return Fleet(fleet.runs, pl.concat([fleet.proxies, extra]), fleet.store)
