"""The fleet as the dashboard sees it: one table of runs, one of proxies, from the store.

Everything is read in bulk: the catalog tables and one lazy scan of all runs' Parquet for the
key metrics (no per-run Python loop over points). Results missing from the store can be
computed in memory (``analyse=True``); the store itself is never written.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
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


def key_metrics(scan: pl.LazyFrame) -> pl.DataFrame:
    """Per run: last finite reward/loss/entropy, max finite grad norm/mismatch, non-finite count.

    >>> lf = pl.LazyFrame({"run": ["a"] * 4, "step": [1, 2, 3, 3], "metric": ["reward", "reward",
    ...     "reward", "grad_norm"], "value": [0.1, 0.5, float("nan"), 3.0]})
    >>> key_metrics(lf).select("run", "reward_last", "grad_norm_max", "nonfinite_points").row(0)
    ('a', 0.5, 3.0, 1)
    """
    finite = pl.col("value").is_finite()
    aggs = [pl.col("value").is_finite().not_().sum().alias("nonfinite_points"),
            pl.col("step").max().alias("last_step")]
    aggs += [pl.col("value").filter((pl.col("metric") == m) & finite).sort_by(
        pl.col("step").filter((pl.col("metric") == m) & finite)).last().alias(f"{m}_last")
        for m in LAST_OF]
    aggs += [pl.col("value").filter((pl.col("metric") == m) & finite).max().alias(f"{m}_max")
             for m in MAX_OF]
    return scan.group_by("run").agg(aggs).sort("run").collect()


def _stored_results(store: RunStore) -> tuple[pl.DataFrame, pl.DataFrame]:
    diag = store.diagnoses().select("run", "label", "onset_step", "confidence")
    comps = store.comparisons()
    rows = []
    for proxy, fid, verdict, text in zip(comps["proxy_run"], comps["fidelity"],
                                         comps["verdict"], comps["json"], strict=True):
        rows.append(_comparison_row(proxy, fid, verdict, json.loads(text) if text else {}))
    return diag, pl.DataFrame(rows, schema=PROXY_SCHEMA, orient="row")


PROXY_SCHEMA = {"proxy_run": pl.Utf8, "fidelity": pl.Float64, "verdict": pl.Utf8,
                "full_runs": pl.Utf8, "reproduced": pl.Boolean, "full_label": pl.Utf8,
                "proxy_label": pl.Utf8}


def _comparison_row(proxy: str, fidelity: float | None, verdict: str,
                    result: dict[str, Any]) -> tuple[Any, ...]:
    faults = result.get("faults") or {}
    return (proxy, fidelity, verdict, ", ".join(result.get("full_runs") or []),
            faults.get("reproduced"), (faults.get("full") or {}).get("label"),
            (faults.get("proxy") or {}).get("label"))


def _analyse_missing(store: RunStore, runs: pl.DataFrame, diag: pl.DataFrame,
                     comps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Diagnose and compare in memory what the store has no result for (when available)."""
    from proxydiag.report.api import optional_analysis

    diagnose: Callable[..., Any] | None = optional_analysis("proxydiag.diagnose.api", "diagnose")
    compare: Callable[..., Any] | None = optional_analysis("proxydiag.fidelity.api", "compare")
    have = set(diag["run"].to_list())
    get = functools.cache(store.get)  # a full run serves every proxy of its group
    made: dict[str, Any] = {}  # diagnoses made here, handed to compare (not made again)
    new_diag = []
    if diagnose is not None:
        for run_id in runs["run"].to_list():
            if run_id not in have:
                d = made[run_id] = diagnose(get(run_id))
                new_diag.append((run_id, d.label, d.onset_step, d.confidence))
    diag = pl.concat([diag, pl.DataFrame(new_diag, schema=diag.schema, orient="row")])
    have_c = set(comps["proxy_run"].to_list())
    new_comp = []
    proxies = runs.filter((pl.col("role") == "proxy") & pl.col("group").is_not_null())
    if compare is not None:
        for proxy_id, group in zip(proxies["run"], proxies["group"], strict=True):
            fulls = runs.filter((pl.col("group") == group) & (pl.col("role") == "full"))
            if proxy_id in have_c or fulls.height == 0:
                continue
            full_runs = [get(r) for r in fulls.sort("seed", nulls_last=True)["run"]]
            c = compare(full_runs, get(proxy_id), full_diagnoses=[made.get(r.id) for r in full_runs],
                        proxy_diagnosis=made.get(proxy_id))
            new_comp.append(_comparison_row(proxy_id, c.fidelity, c.verdict, c.to_dict()))
    comps = pl.concat([comps, pl.DataFrame(new_comp, schema=PROXY_SCHEMA, orient="row")])
    return diag, comps


def load_fleet(store: RunStore, *, analyse: bool = True) -> Fleet:
    """Runs with labels and key metrics, and proxies with fidelity, from ``store``."""
    runs = store.runs()
    diag, comps = _stored_results(store)
    if analyse:
        diag, comps = _analyse_missing(store, runs, diag, comps)
    diag = diag.unique("run", keep="last")
    table = runs.join(diag, on="run", how="left").join(key_metrics(store.scan()), on="run",
                                                       how="left", suffix="_data")
    meta = runs.select("run", "name", "group", "experts_kept", "cost_per_step", "seed")
    names = dict(zip(runs["run"].to_list(), runs["name"].to_list(), strict=True))
    proxies = comps.unique("proxy_run", keep="last").with_columns(
        pl.col("full_runs").map_elements(
            lambda ids: ", ".join(names.get(i, i) for i in ids.split(", ")),
            return_dtype=pl.Utf8)
    ).join(meta, left_on="proxy_run", right_on="run", how="left")
    return Fleet(runs=table.sort("group", "role", "name", nulls_last=True),
                 proxies=proxies.sort("group", "experts_kept", nulls_last=True),
                 store=str(store.path))
