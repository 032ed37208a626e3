"""Plotly figures for custom analysis in notebooks: the same figures the HTML report draws.

>>> import numpy as np
>>> from proxydiag.frame import raw
>>> from proxydiag.run.build import build_run
>>> run = build_run(raw(np.arange(5), ["loss"] * 5, [1.0, 0.8, float("nan"), 0.5, 0.4]),
...                 name="demo", source="demo", fmt="example")
>>> fig = metric([run], "loss")
>>> [t.name for t in fig.data]
['full', 'NaN']
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity.result import Comparison
from proxydiag.report._axis import step_to_axis
from proxydiag.report._downsample import DEFAULT_BUCKETS
from proxydiag.report._escape import esc
from proxydiag.report._figures import FULL_COLOR, PROXY_COLOR, Onset, base_layout, metric_panel
from proxydiag.report._text import ci_text, num
from proxydiag.report._timeline import timeline_figure
from proxydiag.report.content import ReportContent
from proxydiag.run import Run

__all__ = ["fidelity_table", "metric", "panels", "timeline"]


def _onsets(runs: Sequence[tuple[Run, Diagnosis | None, str, str]], align: str) -> list[Onset]:
    out = []
    for run, d, role, color in runs:
        if d is not None and not d.healthy and d.onset_step is not None:
            x = step_to_axis(run, d.onset_step, align=align)
            if x is not None:
                out.append(Onset(f"{role} onset", x, color))
    return out


def metric(
    runs: Run | Sequence[Run],
    metric: str,
    *,
    proxy: Run | None = None,
    diagnoses: Sequence[Diagnosis] = (),
    align: str = "step",
    n_buckets: int = DEFAULT_BUCKETS,
) -> go.Figure:
    """One metric of ``runs`` (the first drawn as a line, all of them as a seed band) and
    of ``proxy``; non-finite points as markers at the edge; onsets from ``diagnoses``."""
    full = [runs] if isinstance(runs, Run) else list(runs)
    by_id = {d.run: d for d in diagnoses}
    marked = [(full[0], by_id.get(full[0].id), "full", FULL_COLOR)] if full else []
    if proxy is not None:
        marked.append((proxy, by_id.get(proxy.id), "proxy", PROXY_COLOR))
    return metric_panel(
        metric,
        full=full,
        proxy=proxy,
        align=align,
        onsets=_onsets(marked, align),
        n_buckets=n_buckets,
    )


def panels(
    full: Run | Sequence[Run],
    proxy: Run | None = None,
    *,
    diagnoses: Sequence[Diagnosis] = (),
    comparison: Comparison | None = None,
    metrics: Sequence[str] | None = None,
    align: str = "step",
) -> list[go.Figure]:
    """The report's metric panels (root-cause metrics first, then compared ones)."""
    fulls = [full] if isinstance(full, Run) else list(full)
    runs = [*fulls, *([proxy] if proxy else [])]
    content = ReportContent(
        full=tuple(fulls),
        proxy=proxy,
        diagnoses={d.run: d for d in diagnoses if any(r.id == d.run for r in runs)},
        comparison=comparison,
        align=align,
    )
    chosen = list(metrics) if metrics is not None else content.panel_metrics()
    return [metric(fulls, m, proxy=proxy, diagnoses=diagnoses, align=align) for m in chosen]


def timeline(diagnosis: Diagnosis | Sequence[Diagnosis]) -> go.Figure:
    """The failure timeline of one or several diagnoses (events on a step axis)."""
    items = [diagnosis] if isinstance(diagnosis, Diagnosis) else list(diagnosis)
    return timeline_figure([(d.run, d) for d in items])


def fidelity_table(comparison: Comparison) -> go.Figure:
    """Per-metric fidelity: score, 95% CI, seed-to-seed baseline, verdict."""
    rows = list(comparison.metrics.items())
    cells = [
        [esc(name) for name, _ in rows],
        [num(m.score) for _, m in rows],
        [ci_text(m.ci) for _, m in rows],
        [num(m.seed_baseline) for _, m in rows],
        [m.verdict for _, m in rows],
    ]
    fill = [
        [
            "#dff3e4"
            if m.verdict == "faithful"
            else "#fff1d6"
            if m.verdict == "drifted"
            else "#fde2e1"
            for _, m in rows
        ]
    ]
    table = go.Table(
        header={
            "values": ["metric", "score", "95% CI", "seed-to-seed", "verdict"],
            "fill_color": "#f1f3f5",
            "align": "left",
        },
        cells={"values": cells, "align": "left", "fill_color": [["white"] * len(rows)] * 4 + fill},
    )
    fig = go.Figure(table)
    title = esc(f"fidelity {comparison.fidelity:.2f} — {comparison.verdict}")
    fig.update_layout(**base_layout(title=title, height_px=120 + 28 * max(len(rows), 1)))
    return fig
