"""Framework namings: which key each framework logs a canonical metric under.

Keys come from the frameworks' source (docs/formats.md#what-each-framework-logs).
A naming logs only some canonical metrics, which decides the faults a run in that naming
can show (:func:`can_show`): a precision fault needs a mismatch metric, a divergence needs
the grad norm, an overflow the loss scale, a skip counter or the grad norm.

The console formats are their own namings: ``megatron`` (Megatron-LM iteration lines: loss,
grad norm, loss scale, skip and NaN counters — no RL metrics, no mismatch) and ``deepspeed``
(DeepSpeed-Chat PPO: actor loss, reward, overflow lines, ``step=N, skipped=K`` lines).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Naming:
    """How one framework names (and when it logs) the canonical metrics."""

    name: str
    keys: dict[str, str]
    #: metrics logged only in fp16 runs
    fp16_only: frozenset[str] = frozenset({"loss_scale"})
    #: on an fp16 overflow the grad norm is logged as inf (GradScaler), or not at all (Megatron)
    grad_on_overflow: str = "inf"
    #: prefix the framework's TensorBoard writer adds (HF Trainer's ``rewrite_logs``)
    tb_prefix: str = ""
    #: constant loss scale a bf16 run logs (Megatron prints 1.0), or None
    bf16_loss_scale: float | None = None
    formats: tuple[str, ...] = ("tensorboard", "mlflow", "csv", "jsonl")
    extra: dict[str, str] = field(default_factory=dict)
    #: the routing shares it logs when the run logs routing (:attr:`Scenario.routing`)
    routing: dict[str, str] = field(default_factory=dict)

    def key_map(self, *, precision: str, fmt: str, routing: bool = False) -> dict[str, str]:
        """canonical -> key this naming logs for a run of ``precision`` written as ``fmt``
        (with its routing shares when ``routing``)."""
        keys = {**self.keys, **(self.routing if routing else {})}
        if precision != "fp16" and self.bf16_loss_scale is None:
            keys = {m: k for m, k in keys.items() if m not in self.fp16_only}
        if fmt == "tensorboard" and self.tb_prefix:
            keys = {m: self.tb_prefix + k for m, k in keys.items()}
        return keys


VERL = Naming(
    "verl",
    {
        "pg_loss": "actor/pg_loss",
        "grad_norm": "actor/grad_norm",
        "entropy": "actor/entropy",
        "reward": "critic/score/mean",
        "response_length": "response_length/mean",
        "kl": "actor/kl_loss",
        "clip_frac": "actor/pg_clipfrac",
        "lr": "actor/lr",
        "mismatch_prob_diff": "training/rollout_probs_diff_mean",
        "mismatch_prob_diff_max": "training/rollout_probs_diff_max",
        "mismatch_corr": "training/rollout_actor_probs_pearson_corr",
        "mismatch_k3": "rollout_corr/k3_kl",
        "mismatch_kl": "rollout_corr/kl",
        "step_time": "perf/time_per_step",
        "throughput": "perf/throughput",
        "loss_scale": "actor/loss_scale",
    },
    routing={
        "mismatch_route_replay": "r3/replay_fraction_active",
        "mismatch_route_change": "train/router/compare_current_set_change_fraction",
    },
)
OPENRLHF = Naming(
    "openrlhf",
    {
        "pg_loss": "train/policy_loss",
        "grad_norm": "train/actor_grad_norm",
        "entropy": "train/entropy_loss",
        "kl": "train/kl",
        "reward": "train/reward",
        "response_length": "train/response_length",
        "clip_frac": "train/ppo_clip_ratio",
        "lr": "train/actor_lr",
        "mismatch_kl": "train/vllm_kl",
    },
    routing={
        "mismatch_route_fallback": "r3/routed_experts_fallback_token_route_fraction",
        "mismatch_route_change": "train/router/compare_current_set_change_fraction",
    },
)
TRL = Naming(
    "trl",
    {
        "pg_loss": "policy_loss",
        "grad_norm": "grad_norm",
        "entropy": "entropy",
        "kl": "kl",
        "reward": "reward",
        "response_length": "completions/mean_length",
        "clip_frac": "clip_ratio/region_mean",
        "lr": "learning_rate",
        "mismatch_logp_diff": "sampling/sampling_logp_difference/mean",
        "mismatch_logp_diff_max": "sampling/sampling_logp_difference/max",
        "tokens": "num_tokens",
    },
    tb_prefix="train/",
    routing={
        "mismatch_route_fallback": "router_replay_replace_rate",
        "mismatch_route_change": "router/compare_current_set_change_fraction",
    },
)
SLIME = Naming(
    "slime",
    {
        "pg_loss": "train/pg_loss",
        "grad_norm": "train/grad_norm",
        "entropy": "train/entropy_loss",
        "kl": "train/ppo_kl",
        "clip_frac": "train/pg_clipfrac",
        "lr": "train/lr-pg_0",
        "mismatch_logp_diff": "train/train_rollout_logprob_abs_diff",
        "reward": "rollout/raw_reward",
        "response_length": "rollout/response_len/mean",
        "step_time": "perf/step_time",
    },
    routing={
        "mismatch_route_fallback": "r3/skip_fraction_active",
        "mismatch_route_change": "train/router/compare_current_set_change_fraction",
    },
)
MEGATRON = Naming(
    "megatron",
    {
        "loss": "lm loss",
        "grad_norm": "grad-norm",
        "loss_scale": "loss-scale",
        "lr": "learning-rate",
        "step_time": "iteration-time",
    },
    grad_on_overflow="absent",
    bf16_loss_scale=1.0,
    formats=("megatron", "tensorboard", "csv"),
)
DEEPSPEED = Naming(
    "deepspeed",
    {
        "pg_loss": "act_loss",
        "reward": "average reward score",
        "lr": "lr",
        "loss_scale": "loss scale",
        "skipped_total": "skipped",
        "step_time": "E2E latency",
    },
    grad_on_overflow="absent",
    formats=("deepspeed",),
)

NAMINGS: dict[str, Naming] = {n.name: n for n in (VERL, OPENRLHF, TRL, SLIME, MEGATRON, DEEPSPEED)}
FORMATS: tuple[str, ...] = ("tensorboard", "mlflow", "csv", "jsonl", "megatron", "deepspeed")

#: canonical metrics that let a run show each failure class (any one suffices)
_SHOWS: dict[str, frozenset[str]] = {
    "fp16_scaler_collapse": frozenset({"loss_scale", "skipped_total", "grad_norm"}),
    "bf16_nonfinite": frozenset({"grad_norm"}),
    "divergence": frozenset({"grad_norm"}),
    "slow_drift": frozenset({"grad_norm"}),
    # reward, and either entropy or KL and clip fraction: the detector needs three symptoms
    "policy_collapse": frozenset({"reward"}),
    "sync_step": frozenset(
        {m for m in VERL.keys | TRL.keys | SLIME.keys | OPENRLHF.keys if m.startswith("mismatch")}
    ),
    # a replayed or fallen-back share; a top-k set-change share
    "routing_replay_off": frozenset({"mismatch_route_replay", "mismatch_route_fallback"}),
    "routing_mismatch": frozenset({"mismatch_route_change"}),
    "lost_master_weights": frozenset({"grad_norm"}),
}
#: formats whose writer logs a restart as it happens (rows whose steps go back)
RESTART_FORMATS = frozenset({"csv", "jsonl"})
#: formats that write a value's every digit (console lines round: a grid of bits is lost)
FULL_PRECISION = frozenset({"tensorboard", "mlflow", "csv", "jsonl"})
for _v in (
    "gradual_climb",
    "climb_then_divergence",
    "export_lag",
    "sync_sawtooth",
    "on_policy_nonzero",
    "resume_shift",
):
    _SHOWS[_v] = _SHOWS["sync_step"]
#: a mismatch beyond its bound from the first step shows only in a metric with a published
#: bound that 5-12x a healthy pair exceeds (a probability difference, a Pearson correlation;
#: a KL estimate's bound of 0.1 is 300x a healthy k3)
_SHOWS["from_start"] = frozenset({"mismatch_prob_diff", "mismatch_corr"})


#: proxy relation -> canonical metrics that show how its dynamics differ before the fault (the
#: token NLL ``loss`` follows entropy and learning; relations not listed show in any naming)
_RELATION_SHOWS: dict[str, frozenset[str]] = {
    "stall": frozenset({"reward", "loss"}),
    "grads": frozenset({"grad_norm"}),
    "collapse": frozenset({"entropy", "loss"}),
}


def shows_relation(naming: str, relation: str, *, precision: str) -> bool:
    """Whether a proxy logged in ``naming`` can show its ``relation``'s pre-fault difference.

    >>> (
    ...     shows_relation("deepspeed", "collapse", precision="fp16"),
    ...     shows_relation("verl", "grads", precision="bf16"),
    ... )
    (False, True)
    """
    needs = _RELATION_SHOWS.get(relation)
    if needs is None:
        return True
    keys = NAMINGS[naming].key_map(precision=precision, fmt=NAMINGS[naming].formats[0])
    return bool(needs & set(keys))


def can_show(naming: str, fmt: str, *, variant: str, precision: str, routing: bool = False) -> bool:
    """Whether a run in ``naming`` written as ``fmt`` can show ``variant`` ("" = healthy).

    >>> can_show("megatron", "megatron", variant="sync_step", precision="bf16")
    False
    >>> can_show("verl", "jsonl", variant="sync_step", precision="bf16")
    True
    """
    spec = NAMINGS[naming]
    if fmt not in spec.formats:
        return False
    if naming == "deepspeed" and (
        precision != "fp16" or variant not in ("", "fp16_scaler_collapse")
    ):
        return False  # DeepSpeed-Chat logs carry no grad norm: only the scaler can show a fault
    if variant == "lost_master_weights" and fmt not in FULL_PRECISION:
        return False
    if variant == "resume_shift" and fmt not in RESTART_FORMATS:
        return False
    if not variant:
        return True
    present = set(spec.key_map(precision=precision, fmt=fmt, routing=routing))
    return bool(present & _SHOWS[variant])
