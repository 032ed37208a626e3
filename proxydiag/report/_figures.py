"""Per-metric panels: full seeds as a band, full and proxy as lines, non-finite points as markers.

Only SVG ``go.Scatter`` traces: WebGL ``scattergl`` does not draw in headless Chromium without
a GPU (nor in some MLflow artifact views). Every user string is escaped (:mod:`.escape`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from proxydiag.report._axis import AXIS_TITLES, to_axis
from proxydiag.report._downsample import DEFAULT_BUCKETS, Drawable, bucket_means, prepare
from proxydiag.report._escape import esc
from proxydiag.run import Run

FULL_COLOR = "#1f6fb4"
PROXY_COLOR = "#e8710a"
SEED_COLOR = "#7f8c9d"
OTHER_COLORS = (
    "#1f6fb4",
    "#e8710a",
    "#2e7d32",
    "#8e24aa",
    "#c62828",
    "#00838f",
    "#6d4c41",
    "#5c6bc0",
    "#9e9d24",
    "#ad1457",
)
BAND_FILL = "rgba(31,111,180,0.16)"
#: a metric whose finite values are all positive and span this ratio gets a log y axis
LOG_RATIO = 100.0
#: marker positions on the panel's hidden 0..1 overlay axis (the panel's edges)
EDGE_Y = {"+inf": 1.0, "NaN": 0.95, "-inf": 0.0}
EDGE_SYMBOL = {"+inf": "triangle-up", "NaN": "x", "-inf": "triangle-down"}


@dataclass(frozen=True)
class Onset:
    """A vertical line on a panel: where a run's fault began (already on the panel's axis)."""

    label: str
    x: float
    color: str


def empty_note(fig: go.Figure, text: str) -> None:
    """Say in grey, in the middle of ``fig``, why it shows nothing."""
    fig.add_annotation(
        text=text,
        showarrow=False,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        font={"color": "#777"},
    )


def base_layout(*, title: str, height_px: int = 300) -> dict[str, object]:
    """A light layout shared by every figure (no plotly template: it would add ~9 kB each)."""
    axis = {"gridcolor": "#e6e8eb", "zeroline": False, "linecolor": "#b8bec6", "showline": True}
    return {
        "title": {"text": title, "x": 0.01, "font": {"size": 14}},
        "template": "none",
        "height": height_px,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#fbfcfd",
        "xaxis": dict(axis),
        "yaxis": dict(axis),
        "legend": {"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        "hovermode": "closest",
    }


def spans_decades(values: Sequence[np.ndarray], *, ratio: float = LOG_RATIO) -> bool:
    """True when all finite values are positive and max/min reaches ``ratio``.

    >>> spans_decades([np.array([1.0, 10.0, 5000.0, np.inf])])
    True
    >>> spans_decades([np.array([0.0, 1e6])])
    False
    """
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.array([])
    if finite.size == 0 or finite.min() <= 0:
        return False
    return bool(finite.max() / finite.min() >= ratio)


def _line(d: Drawable, *, role: str, name: str, color: str, legend: bool = True) -> go.Scatter:
    # float32 halves the page; steps stay exact up to 2**24 and this is for drawing only
    return go.Scatter(
        x=d.x.astype(np.float32),
        y=d.y.astype(np.float32),
        mode="lines",
        name=role,
        connectgaps=False,
        line={"color": color, "width": 1.6},
        showlegend=legend,
        hovertemplate=f"{role}{': ' + name if name else ''}<br>%{{x}}: %{{y}}<extra></extra>",
    )


def _markers(d: Drawable, *, name: str, color: str, legend: set[str]) -> list[go.Scatter]:
    """NaN / +inf / -inf markers at the panel's edge on the hidden overlay axis ``y2``.

    One legend entry per kind (``legend`` holds the kinds already listed); colour says which
    run, the hover text names it and gives the full count.
    """
    traces = []
    for kind, xs, count in (
        ("NaN", d.nan_x, d.n_nan),
        ("+inf", d.posinf_x, d.n_posinf),
        ("-inf", d.neginf_x, d.n_neginf),
    ):
        if count == 0:
            continue
        traces.append(
            go.Scatter(
                x=xs.astype(np.float32),
                y=np.full(len(xs), EDGE_Y[kind], dtype=np.float32),
                yaxis="y2",
                mode="markers",
                name=kind,
                legendgroup=kind,
                showlegend=kind not in legend,
                cliponaxis=False,
                marker={
                    "symbol": EDGE_SYMBOL[kind],
                    "size": 9,
                    "color": color,
                    "line": {"width": 1, "color": color},
                },
                hovertemplate=f"{kind} in {name} at %{{x}} ({count} points in all)<extra></extra>",
            )
        )
        legend.add(kind)
    return traces


def _band(series: list[tuple[np.ndarray, np.ndarray]], *, n_buckets: int) -> list[go.Scatter]:
    """Min–max across seeds (``(x, values)`` each, non-empty) of per-bucket means: what
    run-to-run noise looks like."""
    if len(series) < 2:
        return []
    lo_x = min(float(x[0]) for x, _ in series)
    hi_x = max(float(x[-1]) for x, _ in series)
    # no more buckets than the sparsest seed has points, so every bucket holds data
    n = max(2, min(n_buckets, 400, min(len(x) for x, _ in series)))
    edges = np.linspace(lo_x, hi_x, n + 1)
    means = np.vstack([bucket_means(x, y, edges=edges) for x, y in series])
    with warnings.catch_warnings():  # all-NaN buckets (no seed logged there) stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanmin(means, axis=0), np.nanmax(means, axis=0)
    # a filled band cannot have holes: buckets no seed has a finite value in are left out
    keep = np.isfinite(lo) & np.isfinite(hi)
    centers = ((edges[:-1] + edges[1:]) / 2)[keep]
    lo, hi = lo[keep], hi[keep]
    label = f"{len(series)} full seeds: min–max"
    centers = centers.astype(np.float32)
    return [
        go.Scatter(
            x=centers,
            y=lo.astype(np.float32),
            mode="lines",
            line={"width": 0},
            showlegend=False,
            hoverinfo="skip",
            name=label,
        ),
        go.Scatter(
            x=centers,
            y=hi.astype(np.float32),
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor=BAND_FILL,
            name=label,
            hoverinfo="skip",
        ),
    ]


def _curve(run: Run, metric: str, *, align: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(x on the align axis, values)`` of one run's metric; None when it has no point."""
    steps, values = run.series(metric)
    return (to_axis(run, steps, align=align), values) if len(steps) else None


def metric_panel(
    metric: str,
    *,
    full: Sequence[Run],
    proxy: Run | None = None,
    align: str = "step",
    others: Sequence[Run] = (),
    onsets: Sequence[Onset] = (),
    n_buckets: int = DEFAULT_BUCKETS,
) -> go.Figure:
    """One metric: seed band, the first full run and the proxy as lines, markers, onsets.

    Further full seeds are drawn only as the band (plus their non-finite markers): their lines
    would double the page for what the band already shows. ``others`` (unrelated runs, as in
    a plain diagnosis report) are lines of their own, named by run.
    """
    drawn: list[tuple[Run, str, str, bool]] = [
        (run, "full" if i == 0 else "seed", FULL_COLOR if i == 0 else SEED_COLOR, i == 0)
        for i, run in enumerate(full)
    ]
    if proxy is not None:
        drawn.append((proxy, "proxy", PROXY_COLOR, True))
    drawn += [
        (run, esc(run.name), OTHER_COLORS[i % len(OTHER_COLORS)], True)
        for i, run in enumerate(others)
    ]
    curves = {id(run): _curve(run, metric, align=align) for run, *_ in drawn}
    seeds = [c for run in full if (c := curves[id(run)]) is not None]
    traces: list[go.Scatter] = _band(seeds, n_buckets=n_buckets)
    raw_values, markers, spans = [], [], []
    legend: set[str] = set()
    for run, role, color, as_line in drawn:
        name = esc(run.name) if role != esc(run.name) else ""
        curve = curves[id(run)]
        if curve is None:
            continue
        x, values = curve
        raw_values.append(values)
        spans += [float(x[0]), float(x[-1])]
        d = prepare(x, values, n_buckets=n_buckets)
        if as_line:  # the runs of a plain report share one legend above the panels
            traces.append(_line(d, role=role, name=name, color=color, legend=not others))
        markers += _markers(d, name=f"{role} {name}", color=color, legend=legend)
    fig = go.Figure(traces + markers)
    fig.update_layout(**base_layout(title=esc(metric)))
    fig.update_layout(
        xaxis_title=AXIS_TITLES[align],
        yaxis2={"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
    )
    if spans:
        fig.update_xaxes(range=[min(spans), max(spans)])
    if spans_decades(raw_values):
        fig.update_layout(yaxis_type="log", yaxis_dtick=1)  # a label per decade
    for i, onset in enumerate(onsets):
        if not onset.label:
            fig.add_vline(x=onset.x, line={"color": onset.color, "dash": "dash", "width": 1.5})
            continue
        fig.add_vline(
            x=onset.x,
            line={"color": onset.color, "dash": "dash", "width": 1.5},
            annotation_text=esc(onset.label),
            annotation_position="top left" if i % 2 == 0 else "top right",
            annotation_font={"color": onset.color, "size": 10},
        )
    return fig
