"""The fleet as the dashboard sees it: one table of runs, one of proxies, from the store.

Everything is read in bulk: the catalog tables and one lazy scan of all runs' Parquet for the
key metrics (no per-run Python loop over points). Results missing from the store can be
computed in memory (``analyse=True``); the store itself is never written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from proxydiag.pipeline import Settings

if TYPE_CHECKING:
    from proxydiag.fidelity.recommend import Recommendation
    from proxydiag.fleet.executor import Executor
    from proxydiag.run import Run
    from proxydiag.store import RunStore

#: per run: the last finite value of these metrics ...
LAST_OF = ("reward", "loss", "entropy")
#: ... and the largest finite value of these
MAX_OF = ("grad_norm", "mismatch_prob_diff", "mismatch_k3")


@dataclass(frozen=True)
class Fleet:
    """``runs``: one row per run (catalog + label + key metrics); ``proxies``: one per proxy."""

    runs: pl.DataFrame
    proxies: pl.DataFrame
    store: str = ""
    #: per group with compared proxies: the smallest proxy faithful in every phase
    recommendations: tuple[Recommendation, ...] = ()


def key_metrics(scan: pl.LazyFrame) -> pl.DataFrame:
    """Per run: last finite reward/loss/entropy, max finite grad norm/mismatch, non-finite count.

    >>> lf = pl.LazyFrame({"run": ["a"] * 4, "step": [1, 2, 3, 3], "metric": ["reward", "reward",
    ...     "reward", "grad_norm"], "value": [0.1, 0.5, float("nan"), 3.0]})
    >>> key_metrics(lf).select("run", "reward_last", "grad_norm_max", "nonfinite_points").row(0)
    ('a', 0.5, 3.0, 1)
    """
    finite = pl.col("value").is_finite()
    aggs = [
        pl.col("value").is_finite().not_().sum().alias("nonfinite_points"),
        pl.col("step").max().alias("last_step"),
    ]
    aggs += [
        pl.col("value")
        .filter((pl.col("metric") == m) & finite)
        .sort_by(pl.col("step").filter((pl.col("metric") == m) & finite))
        .last()
        .alias(f"{m}_last")
        for m in LAST_OF
    ]
    aggs += [
        pl.col("value").filter((pl.col("metric") == m) & finite).max().alias(f"{m}_max")
        for m in MAX_OF
    ]
    return scan.group_by("run").agg(aggs).sort("run").collect()


def _stored_results(store: RunStore) -> tuple[pl.DataFrame, pl.DataFrame]:
    diag = store.diagnoses().select("run", "label", "onset_step", "confidence")
    comps = store.comparisons()
    rows = []
    for proxy, fid, verdict, text in zip(
        comps["proxy_run"], comps["fidelity"], comps["verdict"], comps["json"], strict=True
    ):
        rows.append(_comparison_row(proxy, fid, verdict, json.loads(text) if text else {}))
    return diag, pl.DataFrame(rows, schema=PROXY_SCHEMA, orient="row")


PROXY_SCHEMA = {
    "proxy_run": pl.Utf8,
    "fidelity": pl.Float64,
    "verdict": pl.Utf8,
    "full_runs": pl.Utf8,
    "reproduced": pl.Boolean,
    "full_label": pl.Utf8,
    "proxy_label": pl.Utf8,
    "phases": pl.Utf8,
}


def _comparison_row(
    proxy: str, fidelity: float | None, verdict: str, result: dict[str, Any]
) -> tuple[Any, ...]:
    faults = result.get("faults") or {}
    return (
        proxy,
        fidelity,
        verdict,
        ", ".join(result.get("full_runs") or []),
        faults.get("reproduced"),
        (faults.get("full") or {}).get("label"),
        (faults.get("proxy") or {}).get("label"),
        json.dumps(
            [{k: p.get(k) for k in ("name", "verdict", "ci")} for p in result.get("phases") or []]
        ),
    )


class _Diagnoses:
    """Diagnoses made in this call, by run id: a diagnosis is small, so it is kept for the whole
    call (a full run is diagnosed once for all its proxies); the run it was made from is not."""

    def __init__(self, diagnose: Callable[..., Any] | None) -> None:
        self.diagnose = diagnose
        self.made: dict[str, Any] = {}

    def of(self, run_id: str, run: Run) -> Any:
        """The diagnosis of ``run`` (None while the diagnose extra is missing)."""
        if self.diagnose is not None and run_id not in self.made:
            self.made[run_id] = self.diagnose(run)
        return self.made.get(run_id)


def _compare_group(
    store: RunStore,
    compare: Callable[..., Any],
    memo: _Diagnoses,
    full_ids: list[str],
    proxy_ids: list[str],
) -> dict[str, tuple[Any, ...]]:
    """One group: its full runs loaded once for all its proxies, every run dropped on return."""
    full_runs = [store.get(r) for r in full_ids]
    full_diags = [memo.of(rid, run) for rid, run in zip(full_ids, full_runs, strict=True)]
    return {
        pid: _compare_one(compare, full_runs, full_diags, pid, store.get(pid), memo)
        for pid in proxy_ids
    }  # the proxy is an argument: only one is alive at a time


def _compare_one(
    compare: Callable[..., Any],
    full_runs: list[Run],
    full_diags: list[Any],
    proxy_id: str,
    proxy: Run,
    memo: _Diagnoses,
) -> tuple[Any, ...]:
    c = compare(
        full_runs, proxy, full_diagnoses=full_diags, proxy_diagnosis=memo.of(proxy_id, proxy)
    )
    return _comparison_row(proxy_id, c.fidelity, c.verdict, c.to_dict())


def _analyse_on(
    executor: Executor,
    store: RunStore,
    runs: pl.DataFrame,
    diag: pl.DataFrame,
    comps: pl.DataFrame,
    settings: Settings,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`_analyse_missing` with per-run and per-proxy work items on ``executor``."""
    from proxydiag.fleet.missing import missing_results

    ids = runs["run"].to_list()
    proxies = runs.filter((pl.col("role") == "proxy") & pl.col("group").is_not_null())
    todo = set(proxies.filter(~pl.col("run").is_in(comps["proxy_run"].to_list()))["run"].to_list())
    made_diag, made_comp = missing_results(
        store,
        executor=executor,
        proxies_without=todo,
        runs_without=set(ids) - set(diag["run"].to_list()),
        settings=settings,
    )
    new_diag = [(r, d.label, d.onset_step, d.confidence) for r in ids if (d := made_diag.get(r))]
    new_comp = [
        _comparison_row(p, c.fidelity, c.verdict, c.to_dict())
        for p in proxies["run"].to_list()
        if (c := made_comp.get(p)) is not None
    ]
    return (
        pl.concat([diag, pl.DataFrame(new_diag, schema=diag.schema, orient="row")]),
        pl.concat([comps, pl.DataFrame(new_comp, schema=PROXY_SCHEMA, orient="row")]),
    )


def _analyse_missing(
    store: RunStore,
    runs: pl.DataFrame,
    diag: pl.DataFrame,
    comps: pl.DataFrame,
    executor: Executor | None,
    settings: Settings,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Diagnose and compare in memory what the store has no result for (when available).

    One group at a time, so memory follows the largest group, not the fleet; the new rows keep
    the catalog's run order. With an ``executor`` other than in-process, per-run and
    per-proxy work items run on it instead.
    """
    from proxydiag.fleet.analyse import group_fulls
    from proxydiag.report.api import analyses

    if executor is not None and executor.name != "serial":
        return _analyse_on(executor, store, runs, diag, comps, settings)

    diagnose_fn, compare_fn = analyses()
    memo = _Diagnoses(partial(diagnose_fn, config=settings.diagnose))
    compare: Callable[..., Any] | None = partial(compare_fn, config=settings.compare)
    have = set(diag["run"].to_list())
    proxies = runs.filter((pl.col("role") == "proxy") & pl.col("group").is_not_null())
    todo = proxies.filter(~pl.col("run").is_in(comps["proxy_run"].to_list()))
    made_comp: dict[str, tuple[Any, ...]] = {}
    members = group_fulls(runs)
    if compare is not None:
        for group in todo["group"].unique(maintain_order=True).to_list():
            if members.get(group):
                made_comp |= _compare_group(
                    store,
                    compare,
                    memo,
                    list(members[group]),
                    todo.filter(pl.col("group") == group)["run"].to_list(),
                )
    ids = runs["run"].to_list()
    for run_id in ids if memo.diagnose is not None else []:
        if run_id not in have and run_id not in memo.made:
            memo.of(run_id, store.get(run_id))  # loaded, diagnosed and dropped at once
    new_diag = [
        (r, d.label, d.onset_step, d.confidence)
        for r in ids
        if r not in have and (d := memo.made.get(r)) is not None
    ]
    new_comp = [made_comp[p] for p in proxies["run"].to_list() if p in made_comp]
    return (
        pl.concat([diag, pl.DataFrame(new_diag, schema=diag.schema, orient="row")]),
        pl.concat([comps, pl.DataFrame(new_comp, schema=PROXY_SCHEMA, orient="row")]),
    )


def load_fleet(
    store: RunStore,
    *,
    analyse: bool = True,
    executor: Executor | None = None,
    settings: Settings | None = None,
) -> Fleet:
    """Runs with labels and key metrics, and proxies with fidelity, from ``store`` (what is
    analysed in memory, with ``settings``, runs on ``executor`` when one is given)."""
    runs = store.runs()
    diag, comps = _stored_results(store)
    if analyse:
        diag, comps = _analyse_missing(store, runs, diag, comps, executor, settings or Settings())
    diag = diag.unique("run", keep="last")
    table = runs.join(diag, on="run", how="left").join(
        key_metrics(store.scan()), on="run", how="left", suffix="_data"
    )
    meta = runs.select(
        "run",
        "name",
        "group",
        "experts_kept",
        "cost_per_step",
        "seed",
        (pl.col("experts_kept") / pl.col("experts_total")).alias("kept_fraction"),
    )
    names = dict(zip(runs["run"].to_list(), runs["name"].to_list(), strict=True))
    proxies = (
        comps.unique("proxy_run", keep="last")
        .with_columns(
            pl.col("full_runs").map_elements(
                lambda ids: ", ".join(names.get(i, i) for i in ids.split(", ")),
                return_dtype=pl.Utf8,
            )
        )
        .join(meta, left_on="proxy_run", right_on="run", how="left")
    )
    return Fleet(
        runs=table.sort("group", "role", "name", nulls_last=True),
        proxies=proxies.sort("group", "experts_kept", nulls_last=True),
        store=str(store.path),
        recommendations=_recommendations(runs, proxies),
    )


def _recommendations(runs: pl.DataFrame, proxies: pl.DataFrame) -> tuple[Recommendation, ...]:
    """The recommended proxy of every group with compared proxies (phases as stored)."""
    from proxydiag.report.recommend import group_recommendation

    compared = [
        {"proxy_run": p, "fidelity": f, "verdict": v, "phases": json.loads(ph or "[]")}
        for p, f, v, ph in proxies.select("proxy_run", "fidelity", "verdict", "phases").iter_rows()
    ]
    rows = runs.to_dicts()
    groups = proxies["group"].drop_nulls().unique(maintain_order=True).to_list()
    return tuple(group_recommendation(rows, compared, group=g) for g in groups)
