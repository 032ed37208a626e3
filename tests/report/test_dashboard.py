"""The fleet dashboard: tables, scatter of fidelity vs pruning/cost, key metrics, escaping."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
from _fleet_data import fleet_store, fleet_with
from _report_data import XSS, make_run

from proxydiag.report._fleet import key_metrics, load_fleet
from proxydiag.report.dashboard import dashboard_html
from proxydiag.run import Run


def test_key_metrics_use_every_point() -> None:
    run = make_run("a", seed=0, n_steps=400, onset=240)
    km = key_metrics(run.frame.lazy()).row(0, named=True)
    _, grad = run.series("grad_norm")
    assert km["grad_norm_max"] == float(grad[pl.Series(grad).is_finite().to_numpy()].max())
    assert km["nonfinite_points"] == 40 + 1 + 1  # 40 NaN + one +inf grad norm, one -inf pg loss
    _, reward = run.series("reward")
    assert km["reward_last"] == reward[-1] and km["last_step"] == 399


def test_fleet_joins_labels_fidelity_and_metadata(tmp_path: Path) -> None:
    fleet = load_fleet(fleet_store(tmp_path / "store"), analyse=False)
    assert fleet.runs.height == 4
    labels = dict(zip(fleet.runs["name"], fleet.runs["label"], strict=True))
    assert labels == {"full": "healthy", "p50": "loss_divergence", "p25": None, "p12": None}
    got = fleet.proxies.select("name", "experts_kept", "fidelity", "verdict", "reproduced").rows()
    assert got == [
        ("p12", 0.125, 0.35, "unfaithful", False),
        ("p25", 0.25, 0.81, "partial", True),
        ("p50", 0.5, 0.93, "faithful", True),
    ]


def test_dashboard_page_has_tables_and_scatter() -> None:
    html = dashboard_html(fleet_with(name=XSS))
    assert html.count("plotly.js v") == 1
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img" not in html.split("<main>")[1]
    figs = json.loads(re.search(r'id="proxydiag-figures">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert len(figs) == 2
    scatter = figs[0]["fig"]
    assert scatter["layout"]["xaxis"]["title"]["text"] == "experts kept"
    g1 = scatter["data"][0]
    assert g1["x"] == [0.125, 0.25, 0.5] and g1["y"] == [0.35, 0.81, 0.93]
    assert g1["marker"]["symbol"] == ["x", "diamond", "circle"]
    assert "<b>4</b>runs" in html and "<b>3</b>proxies compared" not in html
    assert "<b>4</b>proxies compared" in html
    assert html.count("<tr>") == 1 + 4 + 1 + 4  # header + proxies, header + runs


def test_dashboard_cli_from_a_real_store(tmp_path: Path, monkeypatch: Any) -> None:
    import pytest
    from _report_data import make_comparison, make_diagnosis

    from proxydiag.cli import main
    from proxydiag.report import api
    from proxydiag.store import RunStore

    store = RunStore(tmp_path / "store")
    full = make_run("full", seed=0, n_steps=300, onset=180)
    proxies = [
        make_run(
            f"p{int(k * 100)}", seed=i + 1, n_steps=300, onset=190, role="proxy", experts_kept=k
        )
        for i, k in enumerate((0.5, 0.25))
    ]
    for run in (full, *proxies):
        store.put(run)
    store.put_diagnosis(make_diagnosis(full, onset=180))
    store.put_comparison(make_comparison([full], proxies[0]))
    calls: list[str] = []

    def diagnose(run: Run, **_: Any) -> Any:
        calls.append(run.name)
        return make_diagnosis(run, onset=None)

    def compare(
        fulls: list[Run],
        proxy: Run,
        *,
        full_diagnoses: list[Any] | None = None,
        proxy_diagnosis: Any = None,
        **_: Any,
    ) -> Any:
        calls.append(f"compare {proxy.name}")
        given = [*(full_diagnoses or [None] * len(fulls)), proxy_diagnosis]
        for run, made in zip([*fulls, proxy], given, strict=True):
            if made is None:  # as the real compare: it diagnoses the runs it is given none for
                diagnose(run)
        return make_comparison(fulls, proxy)

    monkeypatch.setattr(api, "analyses", lambda: (diagnose, compare))
    with pytest.raises(SystemExit) as exc:
        main(["dashboard", "--store", str(tmp_path / "store"), "-o", str(tmp_path / "dash")])
    assert exc.value.code == 0
    # what the store lacks, and the full run once as compare's input (its result is stored)
    assert sorted(calls) == ["compare p25", "full", "p25", "p50"]
    html = (tmp_path / "dash" / "index.html").read_text()
    assert html.count("<b>3</b>runs") == 1 and "<b>2</b>proxies compared" in html
    assert html.count('class="badge b-partial"') == 2
    with pytest.raises(SystemExit) as exc:
        main(["dashboard", "--store", str(tmp_path / "none"), "-o", str(tmp_path / "d2")])
    assert exc.value.code == 2


def test_report_and_dashboard_share_one_page_shell() -> None:
    """One template (``page.html``): the same head and scripts, a different subtitle."""
    from _report_data import scenario

    from proxydiag.report.api import report

    dash = dashboard_html(fleet_with())
    page = report(fmt="html", **scenario(n_steps=200))  # type: ignore[arg-type]
    assert "<h1>Fleet <small>proxydiag fleet dashboard</small></h1>" in dash
    assert "<small>proxydiag report</small></h1>" in page
    for html in (dash, page):
        assert html.startswith('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">')
        shown = html.split("<body>")[1].split("<script")[0]
        assert html.count("plotly.js v") == 1 and "$" not in shown
    assert dash.split("<title>")[0] == page.split("<title>")[0]
    assert dash.split("</title>")[1].split("<h1>")[0] == page.split("</title>")[1].split("<h1>")[0]
