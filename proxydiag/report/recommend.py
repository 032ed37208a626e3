"""The recommended proxy of each group of a store, and its words (report, dashboard).

Reads the catalog (runs: role, group, experts kept / total, cost per step) and the stored
comparisons (their JSON, with phases), and applies :func:`proxydiag.fidelity.recommend.recommend`
per group. A comparison stored before phases existed has none: its verdict alone decides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from statistics import median
from typing import TYPE_CHECKING, Any

from proxydiag.fidelity.recommend import ProxyCost, Recommendation, recommend

if TYPE_CHECKING:
    from proxydiag.store import RunStore


def group_recommendation(
    rows: Sequence[Mapping[str, Any]], comparisons: Sequence[Mapping[str, Any]], *, group: str
) -> Recommendation:
    """The recommendation of ``group`` from catalog ``rows`` (``RunStore.runs()`` as dicts) and
    comparison JSONs (those whose proxy is in the group are used, the newest per proxy)."""
    mine = [r for r in rows if r.get("group") == group]
    proxies = {str(r["run"]): r for r in mine if r.get("role") == "proxy"}
    full_costs = [
        float(r["cost_per_step"])
        for r in mine
        if r.get("role") != "proxy" and r.get("cost_per_step") is not None
    ]
    latest = {str(c.get("proxy_run")): c for c in comparisons if c.get("proxy_run") in proxies}
    return recommend(
        list(latest.values()),
        costs={p: ProxyCost.of(r) for p, r in proxies.items()},
        group=group,
        full_cost_per_step=median(full_costs) if full_costs else None,
    )


def store_recommendations(store: RunStore) -> dict[str, Recommendation]:
    """One recommendation per group of ``store`` that has a compared proxy."""
    rows = store.runs().to_dicts()
    comps = [json.loads(j) for j in store.comparisons()["json"].to_list() if j]
    groups = sorted(
        {str(r["group"]) for r in rows if r.get("group") is not None and r.get("role") == "proxy"}
    )
    out = {g: group_recommendation(rows, comps, group=g) for g in groups}
    return {g: rec for g, rec in out.items() if rec.levels}


def lines(rec: Recommendation) -> list[str]:
    """The recommendation and every level, one line each (smallest proxy first)."""
    out = [
        f"group {rec.group}: recommended proxy: "
        f"{rec.recommended.proxy_run if rec.recommended else 'none'} — {rec.reason}"
    ]
    for lv in rec.levels:
        size = (
            f"{lv.kept_fraction:.1%} of the experts"
            if lv.kept_fraction is not None
            else f"{lv.experts_kept:g} experts"
            if lv.experts_kept is not None
            else "size unknown"
        )
        ci = f" [{lv.ci[0]:.2f}, {lv.ci[1]:.2f}]" if lv.ci else ""
        fid = "n/a" if lv.fidelity is None else f"{lv.fidelity:.2f}"
        saving = "n/a" if lv.saving is None else f"{lv.saving:.0%}"
        out.append(f"  {lv.proxy_run}: {size}, saving {saving}, fidelity {fid}{ci}, {lv.why}")
    return out
