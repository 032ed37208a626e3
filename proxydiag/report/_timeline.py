"""The failure timeline: each run's events on a step axis, the root cause marked.

One row per (run, event kind, metric); an event is a bar from its onset to its end step (a
point when it has no end, except a critical one, which lasts to the end of the run); colour is
severity; the root cause is a star and a dashed line.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from proxydiag.diagnose.result import Diagnosis
from proxydiag.events import Event
from proxydiag.report._escape import esc
from proxydiag.report._figures import base_layout, empty_note

SEVERITY_COLOR = {"critical": "#c62828", "warning": "#ef8f00", "info": "#aab2bb"}
#: bar thickness: context (info) thin, so what decides the label stands out on top of it
SEVERITY_WIDTH = {"critical": 9, "warning": 6, "info": 3}
ROOT_COLOR = "#6a1b9a"


def _row(prefix: str, e: Event) -> str:
    metric = f" · {e.metric}" if e.metric else ""
    return esc(f"{prefix}{e.kind}{metric}")


def _severity_trace(
    rows: list[tuple[str, Event]], severity: str, *, last_step: int | None
) -> list[go.Scatter]:
    xs: list[float | None] = []
    ys: list[str | None] = []
    px, py, hover = [], [], []
    for row, e in rows:
        if e.onset_step is None:
            continue
        end = e.end_step if e.end_step is not None else e.onset_step
        if last_step is not None and e.end_step is None and e.severity == "critical":
            end = last_step  # a critical event without an end lasts to the end of the run
        xs += [e.onset_step, end, None]
        ys += [row, row, None]
        px.append(e.onset_step)
        py.append(row)
        hover.append(
            esc(
                f"{e.kind} ({e.severity}, conf {e.confidence:.2f}) steps "
                f"{e.onset_step}–{e.end_step if e.end_step is not None else '…'}: "
                f"{e.evidence}"
            )
        )
    color = SEVERITY_COLOR.get(severity, "#555")
    return [
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            line={"color": color, "width": SEVERITY_WIDTH.get(severity, 6)},
            name=severity,
            legendgroup=severity,
            hoverinfo="skip",
            showlegend=False,
        ),
        go.Scatter(
            x=px,
            y=py,
            mode="markers",
            name=severity,
            legendgroup=severity,
            marker={
                "color": color,
                "size": 9,
                "symbol": "line-ns-open",
                "line": {"width": 2, "color": color},
            },
            hovertext=hover,
            hoverinfo="text",
        ),
    ]


#: above this many (run, event, metric) rows, a multi-run timeline gets one row per run
MAX_DETAIL_ROWS = 24


def _rows(diagnoses: Sequence[tuple[str, Diagnosis]]) -> tuple[list[tuple[str, Event]], list[str]]:
    """``(row, event)`` pairs and the row order: one row per kind·metric (prefixed by run when
    several runs), or one row per run when that would make too many rows."""
    multi = len(diagnoses) > 1
    detail = [
        (_row(f"{name} · " if multi else "", e), e) for name, d in diagnoses for e in d.events
    ]
    if multi and len({r for r, _ in detail}) > MAX_DETAIL_ROWS:
        detail = [(esc(name), e) for name, d in diagnoses for e in d.events]
    order = list(dict.fromkeys([r for r, _ in detail] + [esc(n) for n, _ in diagnoses]))
    return detail, order


def timeline_figure(diagnoses: Sequence[tuple[str, Diagnosis]]) -> go.Figure:
    """Events of each ``(display name, Diagnosis)`` on one step axis, root causes starred."""
    detail, order = _rows(diagnoses)
    by_severity: dict[str, list[tuple[str, Event]]] = {}
    for row, e in detail:
        by_severity.setdefault(e.severity, []).append((row, e))
    per_run = all(row in {esc(n) for n, _ in diagnoses} for row, _ in detail)
    roots_x, roots_y, roots_text = [], [], []
    for name, d in diagnoses:
        rc = d.root_cause
        if rc is not None and rc.onset_step is not None:
            row = (
                esc(name)
                if per_run and len(diagnoses) > 1
                else esc(f"{name + ' · ' if len(diagnoses) > 1 else ''}root cause · {rc.kind}")
            )
            order.append(row)
            roots_x.append(rc.onset_step)
            roots_y.append(row)
            roots_text.append(
                esc(
                    f"{name}: root cause {rc.kind} in {rc.metric or 'run'} "
                    f"at step {rc.onset_step} → {d.label}"
                )
            )
    shown = set(roots_y) | {r for r, _ in detail}  # built once, not per row
    order = [r for r in dict.fromkeys(order) if r in shown]
    if len(diagnoses) > 1:  # each run's rows together, its root cause right below them
        names = [esc(n) for n, _ in diagnoses]
        order.sort(
            key=lambda r: next(
                (i for i, n in enumerate(names) if r == n or r.startswith(f"{n} · ")), 0
            )
        )
    last = max((d.last_step for _, d in diagnoses if d.last_step is not None), default=None)
    traces: list[go.Scatter] = []
    for severity in ("info", "warning", "critical"):
        traces += _severity_trace(by_severity.get(severity, []), severity, last_step=last)
    traces.append(
        go.Scatter(
            x=roots_x,
            y=roots_y,
            mode="markers",
            name="root cause",
            hovertext=roots_text,
            hoverinfo="text",
            marker={"symbol": "star", "size": 15, "color": ROOT_COLOR},
        )
    )
    fig = go.Figure(traces)
    fig.update_layout(**base_layout(title="", height_px=90 + 24 * max(len(order), 1)))
    fig.update_layout(
        xaxis_title="step",
        margin={"t": 30},
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": order[::-1],
            "range": [-0.5, max(len(order), 1) - 0.5],
            "automargin": True,
            "gridcolor": "#eef0f2",
        },
    )
    for x in roots_x:
        fig.add_vline(x=x, line={"color": ROOT_COLOR, "dash": "dash", "width": 1})
    if not order:
        empty_note(fig, "no events")
    if last is not None:
        first = min((d.first_step for _, d in diagnoses if d.first_step is not None), default=0)
        fig.update_xaxes(range=[first, last])
    return fig
