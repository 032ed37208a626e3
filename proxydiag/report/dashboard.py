"""The fleet dashboard: every run's label and key metrics, every proxy's fidelity, and fidelity
against pruning level and cost — how small may a proxy be and still be trusted?

Static HTML (one self-contained ``index.html``, plotly.js embedded once) written from the store
by ``proxydiag dashboard --store DIR -o DIR``. The page template, shared with the report, is
``proxydiag/report/templates/page.html`` (see ``dashboards/README.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
import polars as pl

from proxydiag.report._escape import esc
from proxydiag.report._figures import OTHER_COLORS, base_layout, empty_note
from proxydiag.report._fleet import Fleet
from proxydiag.report._fragments import badge
from proxydiag.report._page import FigureSet, render
from proxydiag.report._text import num, step_text

if TYPE_CHECKING:
    from proxydiag.fleet.executor import Executor
    from proxydiag.pipeline import Settings

VERDICT_SYMBOL = {"faithful": "circle", "partial": "diamond", "unfaithful": "x"}
PALETTE = OTHER_COLORS

RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "run"),
    ("role", "role"),
    ("group", "group"),
    ("seed", "seed"),
    ("experts_kept", "experts kept"),
    ("cost_per_step", "cost/step"),
    ("precision", "precision"),
    ("label", "label"),
    ("onset_step", "onset"),
    ("confidence", "conf."),
    ("last_step", "last step"),
    ("reward_last", "final reward"),
    ("loss_last", "final loss"),
    ("grad_norm_max", "max grad norm"),
    ("mismatch_prob_diff_max", "max mismatch"),
    ("nonfinite_points", "non-finite points"),
)
PROXY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "proxy"),
    ("group", "group"),
    ("experts_kept", "experts kept"),
    ("cost_per_step", "cost/step"),
    ("fidelity", "fidelity"),
    ("verdict", "verdict"),
    ("full_label", "full run's label"),
    ("proxy_label", "proxy's label"),
    ("reproduced", "fault reproduced"),
    ("full_runs", "full runs"),
)
BADGES = {"label", "verdict", "role"}
STEPS = {"onset_step", "last_step", "seed", "nonfinite_points"}


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "<td class=num>—</td>"
    if column in BADGES:
        return f"<td>{badge(str(value))}</td>"
    if column in STEPS:
        return f"<td class=num>{step_text(int(value))}</td>"
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float):
        return f"<td class=num>{esc(num(value))}</td>"
    return f"<td>{esc(value)}</td>"


def table(frame: pl.DataFrame, columns: Sequence[tuple[str, str]]) -> str:
    """An escaped HTML table of ``columns`` (name, header) present in ``frame`` (columns with
    no value at all are left out: a fleet without a loss metric gets no "final loss")."""
    cols = [
        (c, h)
        for c, h in columns
        if c in frame.columns and (frame.height == 0 or frame[c].null_count() < frame.height)
    ]
    head = "".join(f"<th>{esc(h)}</th>" for _, h in cols)
    rows = "".join(
        "<tr>" + "".join(_cell(c, row[c]) for c, _ in cols) + "</tr>"
        for row in frame.select([c for c, _ in cols]).iter_rows(named=True)
    )
    return (
        f'<div class="scroll"><table class=grid><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def fidelity_scatter(proxies: pl.DataFrame, *, x: str, title: str) -> go.Figure:
    """Fidelity of each proxy against ``x`` (experts kept or cost per step), one colour per
    group, marker shape per verdict."""
    fig = go.Figure()
    data = proxies.filter(pl.col(x).is_not_null() & pl.col("fidelity").is_not_null())
    groups = data["group"].unique(maintain_order=True).to_list()
    for i, group in enumerate(groups):
        sub = data.filter(pl.col("group").eq_missing(group)).sort(x)
        fig.add_trace(
            go.Scatter(
                x=sub[x].to_list(),
                y=sub["fidelity"].to_list(),
                mode="lines+markers",
                name=esc(group if group is not None else "no group"),
                line={"color": PALETTE[i % len(PALETTE)], "width": 1, "dash": "dot"},
                marker={
                    "size": 11,
                    "color": PALETTE[i % len(PALETTE)],
                    "symbol": [VERDICT_SYMBOL.get(v, "circle") for v in sub["verdict"]],
                },
                hovertext=[
                    esc(f"{n}: fidelity {f:.2f} ({v})")
                    for n, f, v in zip(sub["name"], sub["fidelity"], sub["verdict"], strict=True)
                ],
                hoverinfo="text",
            )
        )
    fig.update_layout(**base_layout(title=esc(title), height_px=400))
    fig.update_layout(
        xaxis_title=x.replace("_", " "),
        yaxis={"title": "fidelity", "range": [-0.02, 1.05]},
        legend={
            "orientation": "v",
            "x": 1.02,
            "y": 1,
            "xanchor": "left",
            "yanchor": "top",
            "font": {"size": 11},
        },
    )
    if data.height and x == "cost_per_step":
        lo, hi = data[x].cast(pl.Float64).min(), data[x].cast(pl.Float64).max()
        if isinstance(lo, float) and isinstance(hi, float) and lo > 0 and hi / lo > 30:
            fig.update_xaxes(type="log")
    if not data.height:
        empty_note(fig, f"no proxies with {x.replace('_', ' ')} recorded")
    return fig


def recommended_table(fleet: Fleet) -> str:
    """One row per group: the recommended proxy (the smallest faithful in every phase), its
    size, saving and fidelity interval, and what the smaller levels lacked."""
    if not fleet.recommendations:
        return ""
    rows = []
    for rec in fleet.recommendations:
        best = rec.recommended
        size = (
            "—"
            if best is None
            else (
                f"{best.kept_fraction:.1%}"
                if best.kept_fraction is not None
                else num(best.experts_kept)
            )
        )
        ci = "—" if best is None or best.ci is None else f"[{best.ci[0]:.2f}, {best.ci[1]:.2f}]"
        saving = "—" if best is None or best.saving is None else f"{best.saving:.0%}"
        rows.append(
            f"<tr><td>{esc(rec.group)}</td><td>{esc(best.proxy_run if best else 'none')}"
            f"</td><td class=num>{esc(size)}</td><td class=num>{esc(saving)}</td>"
            f"<td class=num>{esc(ci)}</td><td>{esc(rec.reason)}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("group", "recommended proxy", "experts kept", "saving", "fidelity CI", "why")
    )
    return (
        "<h3>Recommended proxy per group</h3><table class=grid><thead><tr>"
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _cards(fleet: Fleet) -> str:
    labels = fleet.runs["label"].value_counts(sort=True) if "label" in fleet.runs.columns else None
    cards = [("runs", fleet.runs.height), ("proxies compared", fleet.proxies.height)]
    if labels is not None:
        cards += [(str(lbl or "not diagnosed"), int(n)) for lbl, n in labels.iter_rows()]
    if fleet.proxies.height:
        cards += [
            (str(v), int(n))
            for v, n in fleet.proxies["verdict"].value_counts(sort=True).iter_rows()
        ]
    inner = "".join(f'<div class="card"><b>{n}</b>{esc(t)}</div>' for t, n in cards)
    return f'<div class="cards">{inner}</div>'


def dashboard_html(fleet: Fleet) -> str:
    """The dashboard page as one HTML document."""
    figures = FigureSet()
    # the kept fraction puts models of different sizes on one axis, when experts_total is known
    size = (
        ("kept_fraction", "Fidelity against the fraction of experts kept")
        if (
            "kept_fraction" in fleet.proxies.columns
            and fleet.proxies["kept_fraction"].drop_nulls().len()
        )
        else ("experts_kept", "Fidelity against experts kept")
    )
    scatter = "".join(
        figures.div(fidelity_scatter(fleet.proxies, x=x, title=t))
        for x, t in (size, ("cost_per_step", "Fidelity against cost per step"))
    )
    body = (
        '<section id="fidelity"><h2>How small may a proxy be?</h2><p class=muted>Each point is '
        "a proxy's fidelity to its full run (shape: ● faithful, ◆ partial, ✕ unfaithful); "
        f'one colour per group.</p><div class="panels">{scatter}</div>'
        f"{recommended_table(fleet)}</section>"
        '<section id="proxies"><h2>Proxies</h2>'
        f"{table(fleet.proxies, PROXY_COLUMNS)}</section>"
        '<section id="runs"><h2>Runs</h2>'
        f"{table(fleet.runs, RUN_COLUMNS)}</section>"
    )
    footer = (
        f"<p>Generated by proxydiag from the store {esc(fleet.store)}. Key metrics use "
        "every point: final = last finite value; max = largest finite value.</p>"
    )
    return render(
        "page.html",
        figures=figures,
        subtitle="proxydiag fleet dashboard",
        title="Fleet",
        headline=_cards(fleet),
        body=body,
        footer=footer,
    )


def write_dashboard(
    store_path: Path,
    out_dir: Path,
    *,
    analyse: bool = True,
    executor: Executor | None = None,
    settings: Settings | None = None,
) -> Path:
    """Write ``index.html`` for the store at ``store_path`` into ``out_dir``; return its path
    (what is analysed in memory, with ``settings``, runs on ``executor`` when one is given)."""
    from proxydiag.report._fleet import load_fleet
    from proxydiag.store import RunStore

    fleet = load_fleet(RunStore(store_path), analyse=analyse, executor=executor, settings=settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = out_dir / "index.html"
    index.write_text(dashboard_html(fleet), encoding="utf-8")
    return index
