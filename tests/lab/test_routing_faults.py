"""The lab's routing and master-weight faults: real numerics on a tiny model, a few steps."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the lab needs torch (pip install 'proxydiag[lab]')")

from proxydiag.lab.rollout import generate, replayed, response_logits  # noqa: E402
from proxydiag.lab.runner import LabRun, run_lab, small  # noqa: E402
from proxydiag.lab.task import prompts  # noqa: E402

FAULT = 6
STEPS = 14


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pretrained")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> dict[str, Path]:
    """One small run per case, trained once for the module."""
    out = tmp_path_factory.mktemp("runs")
    specs = {
        "none": LabRun(),
        "none_r3": LabRun(replay=True),
        "stale_router": LabRun(fault="stale_router"),
        "replay_off": LabRun(fault="replay_off"),
        "lost_master_weights": LabRun(fault="lost_master_weights"),
    }
    done = {}
    for case, spec in specs.items():
        s = replace(small(replace(spec, fault_step=FAULT)), steps=STEPS)
        run_lab(s, out, cache_dir=cache)
        done[case] = out / s.name
    return done


def _metric(run_dir: Path, metric: str) -> tuple[np.ndarray, np.ndarray]:
    import proxydiag

    run = proxydiag.read_run(run_dir)
    assert metric in run.mapping, f"{metric} not read from {sorted(run.mapping)}"
    steps, values = run.series(metric)
    return np.asarray(steps), np.asarray(values, dtype=np.float64)


def test_healthy_run_logs_an_exact_routing_agreement(runs: dict[str, Path]) -> None:
    _, share = _metric(runs["none"], "mismatch_route_change")
    _, order = _metric(runs["none"], "mismatch_route_order_change")
    assert share.size == STEPS and np.all(share == 0.0) and np.all(order == 0.0)


def test_healthy_replaying_run_replays_every_step(runs: dict[str, Path]) -> None:
    _, replay = _metric(runs["none_r3"], "mismatch_route_replay")
    _, share = _metric(runs["none_r3"], "mismatch_route_change")
    assert replay.size == STEPS and np.all(replay == 1.0)
    # a bf16 engine's router picks another expert set than the fp32 learner's on a few tokens
    assert 0.0 < share.mean() < 0.05


def test_stale_router_changes_the_routing_after_the_fault_only(runs: dict[str, Path]) -> None:
    steps, share = _metric(runs["stale_router"], "mismatch_route_change")
    _, order = _metric(runs["stale_router"], "mismatch_route_order_change")
    assert np.all(share[steps < FAULT] == 0.0)
    after = share[steps > FAULT + 1]
    assert after.mean() > 0.005 and np.mean(after > 0) >= 0.8
    assert np.all(order >= share)  # an order change is a set change or more
    # the token probabilities follow the routing (veRL's probability difference)
    _, diff = _metric(runs["stale_router"], "mismatch_prob_diff")
    assert diff[steps > FAULT + 1].mean() > 10 * max(diff[steps < FAULT].max(), 1e-7)


def test_replay_off_drops_the_replayed_share_at_the_fault(runs: dict[str, Path]) -> None:
    steps, replay = _metric(runs["replay_off"], "mismatch_route_replay")
    assert np.all(replay[steps < FAULT] == 1.0) and np.all(replay[steps >= FAULT] == 0.0)


def test_lost_master_weights_puts_the_grad_norm_on_the_bf16_grid(runs: dict[str, Path]) -> None:
    import proxydiag
    from proxydiag.diagnose.detectors.master_weights import on_bf16_grid

    steps, norm = _metric(runs["lost_master_weights"], "grad_norm")
    assert steps.tolist() == list(range(STEPS))  # the resumed segment wins from the fault on
    assert not on_bf16_grid(norm[steps < FAULT]).any()
    assert on_bf16_grid(norm[steps >= FAULT]).all()
    run = proxydiag.read_run(runs["lost_master_weights"])
    assert [e.onset_step for e in run.events if e.kind == "restart"] == [FAULT]
    truth = json.loads((runs["lost_master_weights"] / "lab-done.json").read_text())
    assert truth["precision_kind"] == "lost_master_weights" and truth["onset_step"] == FAULT


def test_replay_routes_the_learner_on_the_recorded_experts(cache: Path) -> None:
    """The routing a sampler records while generating is what the learner's forward over
    the same tokens routes to with the same weights, and replaying other experts changes
    the learner's output and is what it routes to."""
    from proxydiag.lab.pretrain import pretrain

    spec = small(LabRun())
    policy = pretrain(spec.model, seed=0, steps=5, cache_dir=cache)
    gen = torch.Generator().manual_seed(0)
    ro = generate(policy, prompts(6, gen=gen), gen=gen, bf16=False, record_routes=True)
    assert ro.routes is not None
    with torch.no_grad():
        own = response_logits(policy, ro.tokens)
        got = [m.routed.view(6, -1, m.routed.shape[-1]) for m in policy.moes()]
        for recorded, mine in zip(ro.routes, got, strict=True):
            assert recorded.shape == mine.shape
            assert torch.equal(recorded, mine)
        with replayed(policy, ro.routes):
            same = response_logits(policy, ro.tokens)
        assert torch.equal(own, same)
        shifted = [(r + 1) % policy.n_experts() for r in ro.routes]
        with replayed(policy, shifted):
            other = response_logits(policy, ro.tokens)
        assert all(m.replayed for m in policy.moes())
        assert torch.equal(policy.moes()[0].routed, shifted[0].reshape(-1, shifted[0].shape[-1]))
    assert not torch.allclose(own, other)
    assert all(m.replay is None for m in policy.moes())  # replay ends with the block


def test_a_replay_off_suite_brings_its_replaying_healthy_control() -> None:
    from proxydiag.lab.suite import matrix

    runs = matrix(faults=("none", "replay_off"), steps=100, full_seeds=(0, 1), proxies=False)
    assert sorted(r.name for r in runs) == [
        "none-fp32-full-s0",
        "none-fp32-full-s1",
        "none-fp32-r3-full-s0",
        "none-fp32-r3-full-s1",
        "replay_off-fp32-full-s0",
        "replay_off-fp32-full-s1",
    ]
    assert {r.fault_step for r in runs} == {40}
    assert len(matrix(faults=("stale_router",), steps=100)) == 3 + 3  # 3 seeds, 3 proxies
