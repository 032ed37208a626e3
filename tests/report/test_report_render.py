"""The report renderers on hand-built runs and results: content, escaping, size, formats."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from _report_data import make_diagnosis, make_run, scenario

from proxydiag.errors import AnalysisError
from proxydiag.report._downsample import minmax_indices, prepare
from proxydiag.report._figures import metric_panel
from proxydiag.report._page import plotly_js
from proxydiag.report.api import report, resolve


def _figures(html: str) -> list[dict[str, object]]:
    m = re.search(r'id="proxydiag-figures">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))  # type: ignore[no-any-return]


def test_minmax_keeps_spikes_and_bounds_points() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=100_000)
    y[12_345], y[67_890] = 50.0, -50.0
    idx = minmax_indices(y, n_buckets=1000)
    assert len(idx) <= 2002
    assert {12_345, 67_890, 0, 99_999} <= set(idx.tolist())
    # every bucket's extremes are kept: the drawn max of each bucket equals the true max
    buckets = np.arange(100_000) * 1000 // 100_000
    kept_max = np.full(1000, -np.inf)
    np.maximum.at(kept_max, buckets[idx], y[idx])
    true_max = np.full(1000, -np.inf)
    np.maximum.at(true_max, buckets, y)
    np.testing.assert_array_equal(kept_max, true_max)


def test_prepare_separates_nonfinite_and_breaks_the_line() -> None:
    x = np.arange(10_000, dtype=float)
    y = np.ones(10_000)
    y[5000:5100] = np.nan
    y[7000] = np.inf
    y[7001] = -np.inf
    d = prepare(x, y, n_buckets=100)
    assert (d.n_nan, d.n_posinf, d.n_neginf) == (100, 1, 1)
    assert d.nan_x[0] == 5000.0 and d.posinf_x.tolist() == [7000.0]
    assert d.neginf_x.tolist() == [7001.0]
    # the line has a gap (NaN) at the first non-finite point of each run, never a join across
    gaps = d.x[np.isnan(d.y)].tolist()
    assert gaps == [5000.0, 7000.0]
    assert np.isfinite(d.y[~np.isnan(d.y)]).all()


def test_panel_marks_nonfinite_at_edges_and_uses_log_axis() -> None:
    s = scenario(n_steps=1000)
    fig = metric_panel("grad_norm", full=s["full"], proxy=s["proxy"])  # type: ignore[arg-type]
    names = [t.name for t in fig.data]
    assert names.count("NaN") == 4 and names.count("+inf") == 4  # 3 seeds + proxy
    assert sum(t.showlegend is not False for t in fig.data if t.name == "NaN") == 1
    nan_trace = next(t for t in fig.data if t.name == "NaN")
    assert nan_trace.yaxis == "y2" and np.allclose(np.asarray(nan_trace.y), 0.95)
    assert fig.layout.yaxis.type == "log"  # grad norm spans 0.2 .. 1e3
    assert fig.layout.yaxis2.range == (0, 1)
    assert all(t.type == "scatter" for t in fig.data)
    reward = metric_panel("reward", full=s["full"], proxy=s["proxy"])  # type: ignore[arg-type]
    assert reward.layout.yaxis.type is None
    assert [t.name for t in reward.data][:2] == ["3 full seeds: min–max"] * 2


def test_html_report_sections_and_single_plotlyjs() -> None:
    s = scenario(n_steps=600)
    html = report(fmt="html", **s)  # type: ignore[arg-type]
    assert html.count("plotly.js v") == 1 and html.count(plotly_js()[:200]) == 1
    for section in ("Failure timeline", "Metrics", "Fidelity", "Evidence and what to check next"):
        assert f"<h2>{section}</h2>" in html
    assert "partial</span> proxy-e25 is partial to full-s0 (+2 seeds) (fidelity 0.72)" in html
    assert "full-s0: loss_divergence from step 360 (root cause: divergence in grad_norm" in html
    assert "[0.850, 0.960]" in html and "Lower the learning rate" in html
    figs = _figures(html)
    assert [f["id"] for f in figs] == [f"fig-{i}" for i in range(len(figs))]
    assert len(figs) == 1 + 5  # timeline + reward, grad_norm, entropy, pg_loss, loss_scale
    assert "scattergl" not in json.dumps(figs)


def test_user_strings_are_escaped_everywhere() -> None:
    s = scenario(n_steps=300, xss=True)
    html = report(fmt="html", **s)  # type: ignore[arg-type]
    body = html.replace(plotly_js(), "")
    assert "<img" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;full-s0" in body
    figs = json.dumps(_figures(html))
    assert "<img" not in figs and "&lt;img src=x onerror=alert(1)&gt;" in figs
    md = report(fmt="markdown", **s)  # type: ignore[arg-type]
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md


def test_html_size_for_a_1e5_step_run_is_within_budget() -> None:
    s = scenario(n_steps=100_000)
    html = report(fmt="html", **s)  # type: ignore[arg-type]
    data_bytes = len(html.encode()) - len(plotly_js().encode())
    assert data_bytes < 2_000_000, data_bytes
    assert data_bytes > 100_000  # the panels are there


def test_markdown_fits_a_comment() -> None:
    s = scenario(n_steps=400)
    md = report(fmt="markdown", **s)  # type: ignore[arg-type]
    lines = md.splitlines()
    assert lines[0] == "### proxydiag report"
    assert lines[2].startswith("**Verdict:** proxy-e25 is partial to full-s0 (+2 seeds)")
    assert "| reward | 0.910 | [0.850, 0.960] | 0.970 | faithful |" in lines
    assert "- onset: step 240 (60% of the run)" in lines
    assert len(md) < 4000 and len(lines) < 45


def test_json_is_to_dict() -> None:
    s = scenario(n_steps=300)
    doc = json.loads(report(fmt="json", **s))  # type: ignore[arg-type]
    assert doc["comparison"] == s["comparison"].to_dict()  # type: ignore[attr-defined]
    assert [d["run"] for d in doc["diagnoses"]] == [s["full"][0].id, s["proxy"].id]  # type: ignore[index,attr-defined]
    assert doc["diagnoses"][0]["label"] == "loss_divergence"


def test_diagnosis_report_of_plain_runs_and_alignments() -> None:
    run = make_run("solo", seed=3, n_steps=500, onset=300)
    d = make_diagnosis(run, onset=300)
    content = resolve(runs=[run], diagnoses=[d], align="progress")
    assert content.named_diagnoses() == [("solo", d)]
    html = report(runs=[run], diagnoses={"x": d}, fmt="html", align="tokens")
    assert "consumed tokens" in html and "Fidelity</h2>" not in html
    with pytest.raises(AnalysisError, match="align='bogus'"):
        report(runs=[run], diagnoses=[d], align="bogus")
    with pytest.raises(AnalysisError, match="needs both full= and proxy="):
        report(full=[run], diagnoses=[d])
    with pytest.raises(AnalysisError, match="format 'pdf'"):
        report(runs=[run], diagnoses=[d], fmt="pdf")


def test_notebook_reprs_are_escaped_fragments() -> None:
    s = scenario(n_steps=300, xss=True)
    d, c = s["diagnoses"][0], s["comparison"]  # type: ignore[index]
    for html in (d._repr_html_(), c._repr_html_()):  # type: ignore[union-attr]
        assert html.startswith('<div class="proxydiag"><style>')
        assert "<img" not in html and "<script" not in html and "&lt;img" in html
        assert ".proxydiag table.grid th" in html and "\nbody " not in html
    assert "fidelity 0.72" in c._repr_html_()  # type: ignore[union-attr]


def test_timeline_rows_and_root_cause() -> None:
    from proxydiag.report._timeline import MAX_DETAIL_ROWS, timeline_figure

    s = scenario(n_steps=300)
    full_d, proxy_d = s["diagnoses"][0], s["diagnoses"][3]  # type: ignore[index]
    fig = timeline_figure([("full", full_d), ("proxy", proxy_d)])
    rows = list(fig.layout.yaxis.categoryarray)[::-1]
    assert rows[:5] == [
        "full · spike · grad_norm",
        "full · divergence · grad_norm",
        "full · reward_collapse · reward",
        "full · nonfinite · grad_norm",
        "full · root cause · divergence",
    ]
    star = next(t for t in fig.data if t.name == "root cause")
    assert list(star.x) == [180, 180 + 60]  # both onsets, on their own rows
    critical = next(t for t in fig.data if t.name == "critical" and t.mode == "lines")
    assert list(critical.x[:3]) == [180, 299, None]  # an open-ended critical event runs to the end
    many = [(f"run{i}", full_d) for i in range(MAX_DETAIL_ROWS // 4 + 1)]
    collapsed = list(timeline_figure(many).layout.yaxis.categoryarray)[::-1]
    assert collapsed == [f"run{i}" for i in range(len(many))]  # one row per run


def test_panel_metrics_put_the_root_cause_first() -> None:
    s = scenario(n_steps=300)
    content = resolve(
        full=s["full"],
        proxy=s["proxy"],
        diagnoses=s["diagnoses"],  # type: ignore[arg-type]
        comparison=s["comparison"],
    )  # type: ignore[arg-type]
    assert content.panel_metrics() == ["grad_norm", "reward", "entropy", "pg_loss", "loss_scale"]
    assert content.panel_metrics(limit=2) == ["grad_norm", "reward"]


def test_degenerate_series_still_draw() -> None:
    from proxydiag.frame import raw
    from proxydiag.run.build import build_run

    nan, inf = float("nan"), float("inf")
    frame = raw(
        [1, 2, 3, 7], ["grad_norm", "grad_norm", "grad_norm", "loss"], [nan, inf, -inf, 2.0]
    )
    run = build_run(frame, name="odd", source="odd", fmt="example")
    fig = metric_panel("grad_norm", full=[run])
    assert [(t.name, len(t.x)) for t in fig.data] == [
        ("full", 1),
        ("NaN", 1),
        ("+inf", 1),
        ("-inf", 1),
    ]
    assert np.isnan(np.asarray(fig.data[0].y)).all()  # only a gap: nothing finite to join
    single = metric_panel("loss", full=[run])
    assert list(single.data[0].x) == [7.0] and fig.layout.yaxis.type is None
    html = report(runs=[run], diagnoses=[make_diagnosis(run, onset=None)], fmt="html")
    assert len(_figures(html)) == 3  # timeline, grad_norm, loss
    assert "odd: healthy — no failure found over steps 1–7" in html


def test_panel_metrics_draw_the_layer_an_event_named_and_not_every_layer() -> None:
    from proxydiag.diagnose.api import diagnose
    from proxydiag.frame import raw
    from proxydiag.metrics import layer_of
    from proxydiag.run.build import build_run
    from tests._moe_layers import Moe, series

    data = series(Moe(layers=24, fault="rise", layer=13, onset=240), 21)
    steps = np.concatenate([s for s, _ in data.values()])
    keys = [k for k, (s, _) in data.items() for _ in range(s.size)]
    run = build_run(
        raw(steps, keys, np.concatenate([v for _, v in data.values()])),
        name="moe",
        source="mem://moe",
        fmt="test",
    )
    content = resolve(runs=[run], diagnoses=[diagnose(run)])
    panels = content.panel_metrics()
    assert panels[:2] == ["loss", "grad_norm"]
    assert "router_aux_loss_layer_13" in panels[:5]  # the layer the router event named
    others = [m for m in panels if layer_of(m) is not None and m != "router_aux_loss_layer_13"]
    assert panels.index(others[0]) > panels.index("router_z_loss")  # the rest, layers last
