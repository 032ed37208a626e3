"""MoE routing health: routing-replay counters and routing-consistency shares read from every
stack's spelling, replay that goes silently off and routers that drift apart as kinds of
precision fault, and healthy routing left alone."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.metrics import AliasTable
from proxydiag.run import Run
from tests._paths import SCHEMAS

ROUTING_SPELLINGS = {
    # NeMo-RL router replay (docs/guides/router-replay.md)
    "r3/routed_experts_fallback_token_route_fraction": "mismatch_route_fallback",
    # AReaL R3 (r3/README.md)
    "r3/replay_fraction_active": "mismatch_route_replay",
    "compute_logp/r3/replay_fraction_active": "mismatch_route_replay",
    "r3/skip_fraction_active": "mismatch_route_fallback",
    # prime-rl router replay (replayed experts overridden by the trainer's router)
    "router_replay_replace_rate": "mismatch_route_fallback",
    # marin router compare
    "train/router/compare_current_set_change_fraction": "mismatch_route_change",
    "train/router/compare_current_order_change_fraction": "mismatch_route_order_change",
    "train/router/load_balancing_loss": "router_aux_loss",
    "train/router/router_z_loss": "router_z_loss",
    "train/router/routing_entropy_mean": "router_entropy",
    # Megatron-LM MoE tracker
    "moe/load_balancing_loss": "router_aux_loss",
    "moe/z_loss": "router_z_loss",
}


@pytest.mark.parametrize("key", sorted(ROUTING_SPELLINGS))
def test_every_routing_spelling_maps_to_its_canonical_metric(key: str) -> None:
    table = AliasTable.default()
    assert table.resolve([key])[key] == ROUTING_SPELLINGS[key]
    spec = table.specs[ROUTING_SPELLINGS[key]]
    if key.startswith(("r3", "compute_logp", "router_replay", "train/router/compare")):
        assert spec.family and spec.scale  # a share says what its healthy value is


def _run(series: dict[str, np.ndarray], n: int, *, every: int = 1) -> Run:
    steps = np.arange(1, n + 1) * every
    frames = [
        pl.DataFrame({"step": steps, "key": [k] * n, "value": np.asarray(v, dtype=float)})
        for k, v in series.items()
    ]
    raw = pl.concat(frames).with_columns(pl.lit(None, dtype=pl.Float64).alias("wall_time"))
    return Run.from_raw(raw, name="r", source="<test>", fmt="test", attrs={})


def _diagnosed(run: Run) -> tuple[str, int | None, str | None, str]:
    d = diagnose(run)
    out = d.to_dict()
    jsonschema.validate(out, json.loads((SCHEMAS / "diagnosis.schema.json").read_text()))
    kind = d.precision_kind or {}
    return d.label, d.onset_step, kind.get("kind"), kind.get("evidence", "")


def _grad(rng: np.random.Generator, n: int) -> np.ndarray:
    return 0.9 * np.exp(rng.normal(0, 0.15, n))


@pytest.mark.parametrize(
    ("n", "onset", "every", "floor"), [(300, 180, 1, 0.3), (600, 250, 5, 0.7), (160, 60, 10, 0.5)]
)
def test_a_replay_fraction_that_drops_is_routing_replay_off(
    n: int, onset: int, every: int, floor: float
) -> None:
    rng = np.random.default_rng(n + onset)
    i = np.arange(1, n + 1)
    replay = np.where(i < onset, 1.0, floor + 0.1 * rng.random(n))
    # the k3 climbs with it: the learner now routes on its own (AReaL: 0.00037 -> 0.0096)
    k3 = 4e-4 * np.exp(rng.normal(0, 0.1, n)) * np.where(i < onset, 1.0, 25.0)
    run = _run(
        {
            "r3/replay_fraction_active": replay,
            "compute_logp/r3/rollout_train_k3_kl/avg": k3,
            "grad_norm": _grad(rng, n),
        },
        n,
        every=every,
    )
    label, at, kind, evidence = _diagnosed(run)
    assert (label, kind) == ("precision_fault", "routing_replay_off")
    assert at is not None and abs(at - onset * every) <= 3 * every
    assert "mismatch_route_replay" in evidence and "mismatch_k3" in evidence


def test_a_fallback_share_that_rises_is_routing_replay_off_with_no_other_mismatch() -> None:
    rng = np.random.default_rng(7)
    n, onset = 400, 260
    i = np.arange(1, n + 1)
    fallback = np.where(i < onset, 0.0, 0.05 * np.exp(rng.normal(0, 0.2, n)))
    run = _run(
        {"r3/routed_experts_fallback_token_route_fraction": fallback, "loss": 2 - i / 1e3}, n
    )
    label, at, kind, _ = _diagnosed(run)
    assert (label, kind) == ("precision_fault", "routing_replay_off")
    assert at is not None and abs(at - onset) <= 3
    # not read as "a zero mismatch that stopped being zero" (that is on-policy's kind)
    assert kind != "on_policy_nonzero"


def test_a_rising_top_k_set_change_is_a_routing_mismatch_with_its_lead_over_a_collapse() -> None:
    rng = np.random.default_rng(11)
    n, drift, collapse = 500, 200, 330
    i = np.arange(1, n + 1)
    change = 0.004 * np.exp(rng.normal(0, 0.1, n)) * (1 + 0.08 * np.clip(i - drift, 0, None))
    grad = _grad(rng, n) * np.where(i < collapse, 1.0, np.exp(0.04 * (i - collapse)))
    run = _run({"train/router/compare_current_set_change_fraction": change, "grad_norm": grad}, n)
    label, at, kind, evidence = _diagnosed(run)
    assert (label, kind) == ("precision_fault", "routing_mismatch")
    assert at is not None and abs(at - drift) <= 25
    assert "leads the divergence" in evidence


@pytest.mark.parametrize("seed", range(4))
def test_healthy_routing_counters_raise_nothing(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = 400
    # replay near 1 with a rare skipped micro-batch, a near-zero fallback share with a rare
    # abort, a set-change share that wanders within its noise
    replay = np.where(rng.random(n) < 0.03, 0.98, 1.0)
    fallback = np.where(rng.random(n) < 0.05, rng.uniform(1e-4, 2e-3, n), 0.0)
    change = 0.003 * np.exp(rng.normal(0, 0.25, n))
    run = _run(
        {
            "r3/replay_fraction_active": replay,
            "r3/skip_fraction_active": fallback,
            "train/router/compare_current_set_change_fraction": change,
            "grad_norm": _grad(rng, n),
            "loss": 2 - np.arange(n) / 1e3,
        },
        n,
    )
    assert _diagnosed(run)[0] == "healthy"


def test_the_routing_share_dates_the_fault_when_the_token_mismatch_follows_it() -> None:
    # the routers drift apart from step 200; the token-probability quantities (three of them,
    # whose consensus alone would date it) only climb visibly from step 280
    rng = np.random.default_rng(21)
    n, drift, follows = 500, 200, 280
    i = np.arange(1, n + 1)
    change = 0.004 * np.exp(rng.normal(0, 0.1, n)) * (1 + 0.06 * np.clip(i - drift, 0, None))
    late = 1 + 0.03 * np.clip(i - follows, 0, None)
    run = _run(
        {
            "train/router/compare_current_set_change_fraction": change,
            "rollout_corr/k3_kl": 3e-4 * np.exp(rng.normal(0, 0.1, n)) * late**2,
            "training/rollout_probs_diff_mean": 0.003 * np.exp(rng.normal(0, 0.08, n)) * late,
            "train/train_rollout_logprob_abs_diff": 0.02 * np.exp(rng.normal(0, 0.08, n)) * late,
            "loss": 2 - i / 1e3,
        },
        n,
    )
    label, at, kind, evidence = _diagnosed(run)
    assert (label, kind) == ("precision_fault", "routing_mismatch")
    assert at is not None and abs(at - drift) <= 25, at
    assert "token-probability mismatch moves with it" in evidence


@pytest.mark.parametrize("end", [40, 85, 160])
def test_a_watched_prefix_ending_in_two_skipped_batches_raises_nothing(end: int) -> None:
    # a healthy R3 run logged every 5 steps: two rollout aborts in a row at the end of what
    # the watcher has seen so far are no replay gone off
    n = end // 5
    fallback = np.zeros(n)
    fallback[-2:] = [0.0144, 0.0139]
    run = _run({"r3/skip_fraction_active": fallback, "loss": 2 - np.arange(n) / 1e3}, n, every=5)
    assert _diagnosed(run)[0] == "healthy"


def _small_batch_share(rng: np.random.Generator, n: int, rate: np.ndarray) -> np.ndarray:
    """A routing share counted over a small batch: ~1,280 token routes a step (the size
    varies with response lengths), the routes that differ drawn around ``rate``."""
    routes = np.round(1280 * rng.uniform(0.97, 1.03, n))
    return rng.poisson(rate * routes) / routes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_handful_of_routes_of_a_small_batch_is_no_level(seed: int) -> None:
    """A bf16 engine's router against an fp32 learner's, replayed: on a small batch a few
    near-ties flip each step (often none, at times ten), the share starts at exactly 0; one
    route is ~8e-4, far above the share a large batch's ties make, and nothing changed."""
    rng = np.random.default_rng(seed)
    n = 150
    share = _small_batch_share(rng, n, np.full(n, 1.5 / 1280))
    share[:3] = 0.0
    k3 = 5e-6 * np.exp(rng.normal(0, 0.3, n))
    label, onset, kind, _ = _diagnosed(
        _run({"router/compare_current_set_change_fraction": share, "rollout_corr/k3_kl": k3}, n)
    )
    assert (label, kind) == ("healthy", None), (onset, kind)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_small_batch_share_that_climbs_past_a_handful_of_routes_is_found(seed: int) -> None:
    """The same small batch whose rollout router goes stale at step 60: the share climbs to
    ~5% of the routes and the token mismatch follows in part."""
    rng = np.random.default_rng(seed)
    n, at = 150, 60
    t = np.arange(1, n + 1)
    grow = np.clip((t - at) / 60.0, 0.0, 1.0)
    share = _small_batch_share(rng, n, (1.5 + 64.0 * grow) / 1280)
    k3 = 5e-6 * np.exp(rng.normal(0, 0.3, n)) * (1.0 + 8.0 * grow)
    label, onset, kind, _ = _diagnosed(
        _run({"router/compare_current_set_change_fraction": share, "rollout_corr/k3_kl": k3}, n)
    )
    assert (label, kind) == ("precision_fault", "routing_mismatch")
    # a climb's start read back from a noisy count: within a fifth of the climb's length
    assert onset is not None and at - 12 <= onset <= at + 12
