"""Text and Markdown renderings of a :class:`~proxydiag.fidelity.result.Comparison`: every score
in words a reviewer can check (statistic, interval, seed-to-seed value)."""

from __future__ import annotations

from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.result import Comparison, MetricFidelity
from proxydiag.report import _phases
from proxydiag.report._escape import md


def scored_tests(config: FidelityConfig) -> list[str]:
    """The registered fidelity tests that count in a metric's score (weight > 0 in
    ``config.test_weights``), in the registry's order: a new registered test shows up."""
    from proxydiag.fidelity.api import TESTS

    return [name for name in TESTS.names() if config.test_weights.get(name, 0.0) > 0]


def text(c: Comparison, config: FidelityConfig | None = None) -> str:
    """Plain text: verdict, reasons, fault, then each metric (scored metrics first, weakest
    first) with each test's explanation."""
    config = config or FidelityConfig()
    lines = [
        f"proxy {c.proxy_run} vs full {', '.join(c.full_runs)}: {c.verdict}, "
        f"fidelity {c.fidelity:.2f}",
        f"alignment: {c.align}; {c.overlap}",
        f"noise baseline: {c.events.get('baseline', '')}",
        *(f"  - {r}" for r in c.reasons),
        f"fault: {c.faults.explanation}",
        f"{c.events.get('explanation', '')}",
        *_phases.text_lines(c),
        "",
    ]
    scored = set(scored_tests(config))
    for name, m in _ordered(c, config):
        unscored = (
            " (differs by design: not in the overall score)"
            if name in config.unscored_metrics
            else ""
        )
        lines.append(
            f"{name}: {m.verdict}, score {m.score:.2f} [{m.ci[0]:.2f}, {m.ci[1]:.2f}], "
            f"seed pairs {_num(m.seed_baseline)}{unscored}"
        )
        lines += [
            f"    {t.explanation} → {t.score:.2f}" if k in scored else f"    {t.explanation}"
            for k, t in m.tests.items()
        ]
    skipped = c.events.get("skipped_metrics") or {}
    lines += [f"not compared: {m} ({why})" for m, why in skipped.items()]
    return "\n".join(lines)


def _ordered(c: Comparison, config: FidelityConfig) -> list[tuple[str, MetricFidelity]]:
    return sorted(c.metrics.items(), key=lambda kv: (kv[0] in config.unscored_metrics, kv[1].score))


def markdown(c: Comparison, config: FidelityConfig | None = None) -> str:
    """A Markdown summary that fits a PR comment: verdict, reasons, fault, the metric table
    (one column per scored test)."""
    config = config or FidelityConfig()
    columns = scored_tests(config)
    lines = [
        f"**proxy fidelity: {c.verdict}** ({c.fidelity:.2f}) — `{md(c.proxy_run)}` vs "
        f"{', '.join(f'`{md(f)}`' for f in c.full_runs)}",
        "",
        *(f"- {md(r)}" for r in c.reasons),
        f"- fault: {md(c.faults.explanation)}",
        f"- alignment: {c.align}; {md(c.overlap)}",
        *_phases.markdown_lines(c),
        "",
        "| metric | verdict | score [CI] | seed pairs | " + " | ".join(columns) + " |",
        "|---|---|---|---:|" + "---:|" * len(columns),
    ]
    for name, m in _ordered(c, config):
        cells = [f"{m.tests[k].score:.2f}" if k in m.tests else "" for k in columns]
        lines.append(
            f"| {md(name)} | {m.verdict} | {m.score:.2f} [{m.ci[0]:.2f}, {m.ci[1]:.2f}] | "
            f"{_num(m.seed_baseline)} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"
