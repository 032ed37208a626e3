"""Hand-built runs, diagnoses and comparisons for the report tests (no analysis needed)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from proxydiag.diagnose.result import Diagnosis, RootCause
from proxydiag.events import Event
from proxydiag.fidelity.result import Comparison, FaultComparison, MetricFidelity, TestResult
from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run

XSS = "<img src=x onerror=alert(1)>"


def make_run(
    name: str,
    *,
    seed: int,
    n_steps: int = 2000,
    onset: int | None = None,
    role: str = "full",
    experts_kept: float = 1.0,
    extra_key: str | None = None,
) -> Run:
    """A GRPO-like run; with ``onset``, grad norm grows from there and ends in NaN/inf."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n_steps, dtype=np.int64)
    t = steps / n_steps
    noise = np.convolve(rng.standard_normal(n_steps + 9), np.ones(10) / 10, mode="valid")
    reward = 0.8 * (1 - np.exp(-4 * t)) * experts_kept**0.1 + 0.03 * noise
    grad = np.exp(0.3 * rng.standard_normal(n_steps)) * 0.8
    grad[n_steps // 3] = 40.0  # a spike that reverts
    scale = np.full(n_steps, 65536.0)
    if onset is not None:
        grad[onset:] *= np.exp((steps[onset:] - onset) / (n_steps / 12))
        reward[onset:] -= (steps[onset:] - onset) / n_steps * 1.5
        scale[onset:] = 65536.0 / 2 ** np.minimum((steps[onset:] - onset) // 20, 16)
        grad[-40:] = np.nan
        grad[-45] = np.inf
    entropy = 1.2 * np.exp(-t) + 0.02 * noise
    pg = 0.01 * rng.standard_normal(n_steps)
    pg[n_steps // 2] = -np.inf
    tokens = np.cumsum(np.full(n_steps, 4096.0 * (1 + 0.1 * rng.random())))
    cols = {
        "reward": reward,
        "grad_norm": grad,
        "entropy": entropy,
        "pg_loss": pg,
        "loss_scale": scale,
        "tokens": tokens,
    }
    if extra_key:
        cols[extra_key] = 0.5 + 0.1 * noise
    keys = np.concatenate([[k] * n_steps for k in cols])
    values = np.concatenate(list(cols.values()))
    frame = raw(np.tile(steps, len(cols)), keys, values)
    return build_run(
        frame,
        name=name,
        source=f"/tmp/{name}",
        fmt="synthetic",
        attrs={
            "role": role,
            "group": "g1",
            "seed": seed,
            "experts_kept": experts_kept,
            "cost_per_step": experts_kept,
        },
    )


def make_diagnosis(run: Run, *, onset: int | None, evidence_extra: str = "") -> Diagnosis:
    # the spike every run of make_run has, a third of the way in
    spike = Event("spike", "grad_norm", run.last_step // 3, run.last_step // 3 + 1, "info", 0.8, "")
    if onset is None:
        return Diagnosis(
            run.attrs["source"],
            run.id,
            "healthy",
            None,
            0.93,
            None,
            events=(replace(spike, evidence="grad_norm 0.8 -> 40 reverted"),),
            first_step=run.first_step,
            last_step=run.last_step,
        )
    events = (
        replace(spike, evidence="grad_norm 0.8 -> 40 reverted within 1 step"),
        Event(
            "divergence",
            "grad_norm",
            onset,
            None,
            "critical",
            0.9,
            (
                f"grad_norm grows x12 over {run.last_step - onset} steps, "
                f"no reversion {evidence_extra}"
            ),
        ),
        Event("reward_collapse", "reward", onset + 60, None, "warning", 0.7, "reward 0.78 -> 0.05"),
        Event(
            "nonfinite",
            "grad_norm",
            run.last_step - 44,
            run.last_step,
            "critical",
            1.0,
            "grad_norm +inf at one step then NaN for 40 steps",
        ),
    )
    return Diagnosis(
        run.attrs["source"],
        run.id,
        "loss_divergence",
        onset,
        0.88,
        RootCause("divergence", "grad_norm", onset),
        events=events,
        hints=(
            "Lower the learning rate or tighten gradient clipping.",
            f"Check the optimizer state around step {onset}.",
        ),
        missing=("mismatch_prob_diff",),
        metrics={"grad_norm": "actor/grad_norm"},
        first_step=run.first_step,
        last_step=run.last_step,
        summary="grad norm grew, then NaN",
    )


def make_comparison(full: list[Run], proxy: Run, *, metric_key: str = "reward") -> Comparison:
    def mf(score: float, verdict: str) -> MetricFidelity:
        tests = {
            "trend": TestResult(
                "trend",
                0.93,
                score,
                (score - 0.05, min(score + 0.04, 1.0)),
                0.97,
                "Spearman 0.93 [0.88, 0.96], seed-to-seed 0.97",
            )
        }
        return MetricFidelity(
            "m",
            score,
            (score - 0.06, min(score + 0.05, 1.0)),
            0.97,
            verdict,
            tests,
            explanation=f"trend and volatility within seeds ({verdict})",
        )  # type: ignore[arg-type]

    metrics = {
        metric_key: mf(0.91, "faithful"),
        "grad_norm": mf(0.74, "drifted"),
        "entropy": mf(0.42, "diverged"),
    }
    faults = FaultComparison(
        {"label": "loss_divergence", "onset_step": 1200},
        {"label": "loss_divergence", "onset_step": 1260},
        60,
        0.03,
        True,
        "both loss_divergence; proxy onset 60 steps later (3% of the run)",
    )
    return Comparison(
        0.72,
        "partial",
        "step",
        metrics,
        faults,
        full_runs=tuple(r.id for r in full),
        proxy_run=proxy.id,
        overlap="overlap: steps 0–1999",
        reasons=("fault reproduced but entropy dynamics outside the seed range",),
    )


def scenario(*, n_steps: int = 2000, xss: bool = False) -> dict[str, object]:
    """Three full seeds and one proxy with a divergence, plus their results."""
    onset = int(n_steps * 0.6)
    prefix = XSS if xss else ""
    full = [
        make_run(
            f"{prefix}full-s{i}",
            seed=i,
            n_steps=n_steps,
            onset=onset + 7 * i,
            extra_key=XSS if xss else None,
        )
        for i in range(3)
    ]
    proxy = make_run(
        f"{prefix}proxy-e25",
        seed=10,
        n_steps=n_steps,
        onset=onset + 60,
        role="proxy",
        experts_kept=0.25,
        extra_key=XSS if xss else None,
    )
    diags = [
        make_diagnosis(r, onset=onset + 7 * i, evidence_extra=prefix) for i, r in enumerate(full)
    ]
    diags.append(make_diagnosis(proxy, onset=onset + 60, evidence_extra=prefix))
    comp = make_comparison(full, proxy, metric_key=XSS if xss else "reward")
    return {"full": full, "proxy": proxy, "diagnoses": diags, "comparison": comp}
