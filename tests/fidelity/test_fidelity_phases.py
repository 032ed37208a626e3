"""Phases of a comparison: pre-fault learning and fault response judged apart (explicit
diagnoses, so the detectors do not decide these tests)."""

from __future__ import annotations

import ast
import json

import jsonschema
import numpy as np
import pytest
from _fidelity_runs import compare_healthy, curves, diag, make_run

from proxydiag.fidelity import _aggregate
from proxydiag.fidelity._progress import not_learning
from proxydiag.fidelity.api import compare
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.result import Comparison
from proxydiag.report._fragments import comparison_block
from proxydiag.report.comparison import markdown, text
from proxydiag.run import Run
from tests._paths import ROOT, SCHEMAS

N, ONSET = 1000, 600
CFG = FidelityConfig(n_boot=100)
SCHEMA = json.loads((SCHEMAS / "comparison.schema.json").read_text())


def diverging(
    seed: int,
    onset: int = ONSET,
    *,
    grad_scale: float = 1.0,
    grad_noise: float = 1.0,
    **kw: float | bool,
) -> Run:
    """Grad norm climbing four decades from ``onset``, reward collapsing; before it, the
    curves of :func:`curves` with grad norms ``grad_scale`` × larger and ``grad_noise`` ×
    noisier (the issue's optimiser that differs)."""
    data = curves(N, seed=seed, **kw)  # type: ignore[arg-type]
    log_grad = np.log(data["grad_norm"])
    log_grad = np.log(grad_scale) + log_grad.mean() + grad_noise * (log_grad - log_grad.mean())
    ramp = np.clip(np.arange(N) - onset, 0, None) / 40.0
    data["grad_norm"] = np.exp(log_grad + np.minimum(ramp, 9.2))
    data["reward"] = data["reward"] - 0.6 * (1 - np.exp(-ramp))
    data["entropy"] = data["entropy"] * (1 + 3 * (1 - np.exp(-ramp)))
    return make_run(f"div{seed}-{grad_scale}-{grad_noise}", data)


FULLS = [diverging(s) for s in range(3)]


def faulty(proxy: Run, onset: int = ONSET, config: FidelityConfig = CFG) -> Comparison:
    return compare(
        FULLS,
        proxy,
        config=config,
        full_diagnoses=[diag(f, "loss_divergence", ONSET) for f in FULLS],
        proxy_diagnosis=diag(proxy, "loss_divergence", onset),
    )


def test_a_healthy_full_run_has_one_phase_the_whole_run() -> None:
    fulls = [make_run(f"h{s}", curves(N, seed=s)) for s in range(3)]
    proxy = make_run("h9", curves(N, seed=9))
    c = compare_healthy(fulls, proxy, config=CFG)
    assert [p.name for p in c.phases] == ["whole"] and c.phases[0].verdict == "faithful"
    assert c.phases[0].metrics == c.metrics and c.fidelity == pytest.approx(c.phases[0].fidelity)


def test_a_faithful_proxy_is_faithful_in_both_phases() -> None:
    c = faulty(diverging(40, ONSET + 10))
    pre, fault = c.phases
    assert (pre.name, fault.name) == ("pre_fault", "fault")
    assert pre.progress[1] == pytest.approx(0.57, abs=0.01)  # 3% before the onset at 60%
    assert c.verdict == "faithful" and pre.verdict == fault.verdict == "faithful", c.reasons
    assert c.fidelity <= min(pre.fidelity or 1, fault.fidelity or 1) + 1e-9
    assert pre.learning["reward"]["status"] == "learns"


def test_a_proxy_that_reproduces_the_fault_but_does_not_learn_is_unfaithful() -> None:
    c = faulty(diverging(41, ONSET, learns=False))
    assert c.faults.reproduced and c.verdict == "unfaithful", c.reasons
    pre = c.phase("pre_fault")
    assert pre is not None and pre.verdict == "unfaithful" and (pre.fidelity or 1) < 0.3
    assert pre.learning["reward"]["fraction_ci"][1] < 0.5
    assert any("does not learn" in r for r in c.reasons)
    whole = faulty(diverging(41, ONSET, learns=False), config=CFG.replace(whole_run_tests=True))
    assert _aggregate.dynamics(whole.metrics, CFG) >= 0.9  # the whole range alone scores high
    assert whole.verdict == "unfaithful"  # and the phases still decide


def test_with_phases_the_whole_run_table_is_assembled_from_them() -> None:
    """One analysis in all: each whole-run test is the phases' scores weighted by their share
    of progress (its replicates likewise), its statistic and interval kept per phase."""
    c = faulty(diverging(40, ONSET + 10))
    pre, fault = c.phases
    share = pre.progress[1] - pre.progress[0]
    for name, m in c.metrics.items():
        for test, t in m.tests.items():
            parts = [p.metrics[name].tests[test] for p in (pre, fault)]
            expected = share * parts[0].score + (1 - share) * parts[1].score
            assert t.score == pytest.approx(expected), (name, test)
            assert t.value is None and t.ci is None
            assert set(t.details["phases"]) == {"pre_fault", "fault"}
            assert t.explanation.startswith(f"{name} {test}: pre_fault: ")
            assert f" | fault: {parts[1].explanation.removeprefix(f'{name} {test}: ')}" in (
                t.explanation
            )
        assert m.ci[0] <= m.score <= m.ci[1]
    jsonschema.validate(c.to_dict(), SCHEMA)
    tested = faulty(diverging(40, ONSET + 10), config=CFG.replace(whole_run_tests=True))
    assert all(m.tests["trend"].value is not None for m in tested.metrics.values())
    assert [p.verdict for p in tested.phases] == [p.verdict for p in c.phases]


def test_larger_noisier_gradients_before_the_fault_are_not_averaged_away() -> None:
    """The issue's case (b): 4x grad norms, 3x their noise, seeds within x1.1; the whole run
    scores high, the pre-fault phase does not."""
    c = faulty(diverging(42, ONSET, grad_scale=4.0, grad_noise=3.0))
    pre = c.phase("pre_fault")
    assert pre is not None and pre.verdict == "partial", pre.reasons
    assert pre.metrics["grad_norm"].verdict == "diverged"
    whole = faulty(
        diverging(42, ONSET, grad_scale=4.0, grad_noise=3.0),
        config=CFG.replace(whole_run_tests=True),
    )
    assert _aggregate.dynamics(whole.metrics, CFG) >= 0.8  # what the whole range alone says
    assert c.verdict == "partial" and c.fidelity <= CFG.partial_below


def test_a_much_faster_entropy_collapse_before_the_fault_is_off() -> None:
    c = faulty(diverging(43, ONSET, tau=0.05))
    pre = c.phase("pre_fault")
    assert pre is not None and pre.verdict != "faithful", pre.reasons
    assert c.verdict != "faithful"


def test_too_short_a_phase_is_undecidable_never_agreement() -> None:
    fulls = [diverging(s, 60) for s in range(3)]
    proxy = diverging(44, 60)
    c = compare(
        fulls,
        proxy,
        config=CFG,
        full_diagnoses=[diag(f, "loss_divergence", 60) for f in fulls],
        proxy_diagnosis=diag(proxy, "loss_divergence", 60),
    )
    pre = c.phase("pre_fault")
    assert pre is not None and pre.verdict == "undecidable" and pre.fidelity is None
    assert not pre.metrics and any("undecidable" in r for r in c.reasons)


def test_phases_in_json_text_markdown_and_html() -> None:
    c = faulty(diverging(42, ONSET, grad_scale=4.0, grad_noise=3.0))
    data = c.to_dict()
    jsonschema.validate(data, SCHEMA)
    assert [p["name"] for p in data["phases"]] == ["pre_fault", "fault"]
    assert "pre_fault (0%–57% of progress): partial" in text(c)
    assert "| 0%–57% | partial |" in markdown(c) and "pre\\_fault" in markdown(c)
    assert "<b>Phases</b>" in comparison_block(c) and "pre_fault" in comparison_block(c)


def test_phase_thresholds_come_from_the_config() -> None:
    loose = CFG.replace(level_diverged_ratio=100.0, diverged_factor=100.0)
    proxy = diverging(42, ONSET, grad_scale=4.0, grad_noise=3.0)
    c = compare(
        FULLS,
        proxy,
        config=loose,
        full_diagnoses=[diag(f, "loss_divergence", ONSET) for f in FULLS],
        proxy_diagnosis=diag(proxy, "loss_divergence", ONSET),
    )
    assert c.phase("pre_fault").metrics["grad_norm"].verdict != "diverged"  # type: ignore[union-attr]


def test_align_imports_no_analysis() -> None:
    """One-way data flow: no module of proxydiag.align imports proxydiag.fidelity."""
    align = ROOT / "proxydiag" / "align"
    imported = {
        alias.name if isinstance(node, ast.Import) else str(node.module)
        for path in align.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [node])
    }
    assert not [m for m in imported if m.startswith("proxydiag.fidelity")]


def test_a_noise_free_full_run_that_learns_is_explained_not_a_crash() -> None:
    """A full run whose reward rises without noise has infinitely many σ of change."""
    t = np.linspace(0, 1, N)
    data = {"reward": 0.2 + 0.6 * t, "loss": 1.0 - 0.5 * t}
    fulls = [make_run(f"clean{s}", data) for s in range(2)]
    flat = make_run("flat", {"reward": np.full(N, 0.2), "loss": np.full(N, 1.0)})
    c = compare(
        fulls,
        flat,
        config=CFG,
        full_diagnoses=[diag(f, "loss_divergence", ONSET) for f in fulls],
        proxy_diagnosis=diag(flat, "loss_divergence", ONSET),
    )
    assert c.verdict == "unfaithful" and any("does not learn" in r for r in c.reasons), c.reasons
    record = {"status": "less", "fraction": 0.0, "fraction_ci": [0.0, 0.0], "sigma_full": None}
    assert "(noise-free)" in str(not_learning({"reward": record}, CFG))  # an infinite z
