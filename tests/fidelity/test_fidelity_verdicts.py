"""The issue's verdict rules, with explicit diagnoses (independent of the detectors)."""

from __future__ import annotations

import numpy as np
import pytest
from _fidelity_runs import curves, diag, make_run

from proxydiag.fidelity.api import compare
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.run import Run

N = 1000
CFG = FidelityConfig(n_boot=100)


def diverging(seed: int, onset: int, **kw: float) -> Run:
    """A run whose grad norm grows without reverting from ``onset``, reward collapsing."""
    data = curves(N, seed=seed, **kw)  # type: ignore[arg-type]
    ramp = np.clip(np.arange(N) - onset, 0, None) / 60.0
    data["grad_norm"] = data["grad_norm"] * np.exp(ramp)
    data["reward"] = data["reward"] - 0.4 * (1 - np.exp(-ramp))
    return make_run(f"div{seed}-{onset}", data)


FULLS_FAULTY = [diverging(s, 500) for s in range(3)]
FULLS_HEALTHY = [make_run(f"full{s}", curves(N, seed=s)) for s in range(3)]


def run_compare(
    fulls: list[Run],
    proxy: Run,
    full_label: str,
    full_onset: int | None,
    proxy_label: str,
    proxy_onset: int | None,
):  # type: ignore[no-untyped-def]
    return compare(
        fulls,
        proxy,
        config=CFG,
        full_diagnoses=[diag(f, full_label, full_onset) for f in fulls],
        proxy_diagnosis=diag(proxy, proxy_label, proxy_onset),
    )


def test_identical_runs_score_one() -> None:
    c = run_compare(FULLS_HEALTHY[:1], FULLS_HEALTHY[0], "healthy", None, "healthy", None)
    assert c.fidelity == 1.0 and c.verdict == "faithful"
    assert all(m.score == 1.0 and m.ci == (1.0, 1.0) for m in c.metrics.values())


@pytest.mark.parametrize("seed", [10, 11, 12, 13])
def test_a_full_seed_against_the_other_seeds_is_faithful(seed: int) -> None:
    c = run_compare(
        FULLS_HEALTHY, make_run(f"s{seed}", curves(N, seed=seed)), "healthy", None, "healthy", None
    )
    assert c.verdict == "faithful" and c.fidelity > 0.9


def test_a_pruned_proxy_that_learns_less_is_faithful() -> None:
    proxy = make_run("p", curves(N, seed=20, ceiling=0.6, tau=0.28, noise=1.2))
    c = run_compare(FULLS_HEALTHY, proxy, "healthy", None, "healthy", None)
    assert c.verdict == "faithful"
    assert c.metrics["reward"].tests["level"].value == pytest.approx(0.73, abs=0.04)


def test_reproduced_fault_with_a_small_lag_is_faithful() -> None:
    c = run_compare(
        FULLS_FAULTY, diverging(30, 540), "loss_divergence", 500, "loss_divergence", 540
    )
    assert c.faults.reproduced and c.faults.onset_lag_progress == pytest.approx(0.04, abs=0.001)
    assert c.verdict == "faithful", c.reasons
    assert "proxy axis warped to register its fault onset (step 540)" in c.overlap


@pytest.mark.parametrize(
    ("proxy_label", "proxy_onset", "outcome"),
    [
        ("healthy", None, "fault_missing"),
        ("loss_divergence", 700, "fault_late"),
        ("loss_divergence", 350, "fault_early"),
        ("gradient_overflow", 500, "wrong_fault"),
    ],
)
def test_fault_rules_make_the_proxy_unfaithful(
    proxy_label: str, proxy_onset: int | None, outcome: str
) -> None:
    c = run_compare(
        FULLS_FAULTY, diverging(40, 500), "loss_divergence", 500, proxy_label, proxy_onset
    )
    assert c.faults.outcome == outcome and not c.faults.reproduced
    assert c.verdict == "unfaithful" and c.fidelity <= 0.3
    assert c.reasons[0].startswith(outcome)


def test_a_proxy_failing_where_the_full_run_is_healthy_is_unfaithful() -> None:
    c = run_compare(FULLS_HEALTHY, diverging(41, 600), "healthy", None, "loss_divergence", 600)
    assert c.faults.outcome == "extra_fault" and c.verdict == "unfaithful"


def test_a_flat_proxy_is_unfaithful() -> None:
    c = run_compare(
        FULLS_HEALTHY,
        make_run("flat", curves(N, seed=50, learns=False)),
        "healthy",
        None,
        "healthy",
        None,
    )
    assert c.verdict == "unfaithful" and c.fidelity < 0.3
    assert c.reasons[0].startswith("does not learn: full run's reward changes +")


def test_a_noisier_proxy_that_learns_most_of_the_change_learns() -> None:
    """A modest full run (reward +4.3σ of its noise) and a proxy 1.4x as noisy that gains 73%
    of its change: +2.2σ of its own noise is under ``learn_min_sigma``, but the proxy learns;
    its noise is for the dynamics tests to judge. One that gains 10% still does not learn."""
    fulls = [make_run(f"modest{s}", curves(N, seed=s, ceiling=0.4)) for s in range(3)]
    noisy = make_run("noisy", curves(N, seed=60, ceiling=0.38, noise=1.4))
    c = run_compare(fulls, noisy, "healthy", None, "healthy", None)
    trend = c.metrics["reward"].tests["trend"].details
    assert 1.5 < trend["change_sigma_proxy"] < 3.0 < trend["change_sigma_full"]
    assert c.verdict == "faithful"
    flat = make_run("flat-noisy", curves(N, seed=60, ceiling=0.26, noise=1.4))
    c = run_compare(fulls, flat, "healthy", None, "healthy", None)
    assert c.verdict == "unfaithful" and c.reasons[0].startswith("does not learn")


def test_a_wrong_trend_is_not_faithful() -> None:
    c = run_compare(
        FULLS_HEALTHY,
        make_run("down", curves(N, seed=51, reward_dir=-0.5)),
        "healthy",
        None,
        "healthy",
        None,
    )
    assert c.verdict == "unfaithful"
    assert c.metrics["reward"].verdict == "diverged"


def test_reproduced_fault_with_other_dynamics_is_partial() -> None:
    proxy = diverging(60, 510, noise=5.0, tau=0.6)
    c = run_compare(FULLS_FAULTY, proxy, "loss_divergence", 500, "loss_divergence", 510)
    assert c.faults.reproduced and c.verdict == "partial", c.reasons
    assert any(r.startswith("dynamics outside the seed-to-seed range") for r in c.reasons)


def test_one_full_seed_uses_pseudo_seeds() -> None:
    c = run_compare(
        FULLS_HEALTHY[:1], make_run("s", curves(N, seed=70)), "healthy", None, "healthy", None
    )
    assert c.verdict == "faithful"
    assert c.events["baseline"].startswith("1 full seed: 8 pseudo-seeds")


def test_symptoms_in_another_order_make_a_reproduced_fault_partial() -> None:
    from dataclasses import replace

    from proxydiag.events import Event

    def with_symptoms(run: Run, order: list[str]):  # type: ignore[no-untyped-def]
        evs = tuple(
            Event(kind, "grad_norm", 520 + 60 * i, None, "warning", 0.9, kind)
            for i, kind in enumerate(order)
        )
        return replace(diag(run, "loss_divergence", 500), events=evs)

    fulls = FULLS_FAULTY
    proxy = diverging(80, 510)
    usual = ["spike", "mismatch_climb", "divergence"]
    c = compare(
        fulls,
        proxy,
        config=CFG,
        full_diagnoses=[with_symptoms(f, usual) for f in fulls],
        proxy_diagnosis=with_symptoms(proxy, usual[::-1]),
    )
    assert c.faults.reproduced and c.events["details"]["kendall_tau"] == -1.0
    assert c.events["details"]["seed_kendall_tau"] == 1.0 and c.events["details"]["order_differs"]
    assert c.verdict == "partial" and c.reasons[0].startswith("symptoms in another order")
