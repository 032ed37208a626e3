"""One lab run: pre-train (cached), prune to a proxy if asked, post-train with GRPO, log."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from proxydiag.lab.injection import FaultSpec
from proxydiag.lab.model import ModelConfig, MoEPolicy
from proxydiag.run import slug

DONE = "lab-done.json"


@dataclass(frozen=True)
class LabRun:
    fault: str = "none"
    fault_step: int = 60
    experts_kept: int = 8
    seed: int = 0
    steps: int = 150
    precision: str = "fp32"
    pretrain_steps: int = 300
    pretrain_seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    #: routing replay (R3) with a bf16 rollout engine, the whole run (``replay_off`` replays
    #: until its fault whatever this says)
    replay: bool = False

    @property
    def name(self) -> str:
        role = "full" if self.experts_kept == self.model.n_experts else f"proxy{self.experts_kept}"
        return slug(f"{self.group}-{role}-s{self.seed}")

    @property
    def group(self) -> str:
        return slug(f"{self.fault}-{self.precision}" + ("-r3" if self.replay else ""))


def _build(spec: LabRun, cache_dir: Path | None) -> tuple[MoEPolicy, list[list[int]] | None]:
    from proxydiag.lab.pretrain import pretrain
    from proxydiag.lab.prune import prune_experts

    base = pretrain(
        spec.model, seed=spec.pretrain_seed, steps=spec.pretrain_steps, cache_dir=cache_dir
    )
    if spec.experts_kept >= spec.model.n_experts:
        return base, None
    proxy, kept = prune_experts(
        base, keep_ratio=spec.experts_kept / spec.model.n_experts, seed=spec.pretrain_seed
    )
    return proxy, kept


def run_lab(
    spec: LabRun,
    out_dir: Path,
    *,
    cache_dir: Path | None = None,
    mlflow_uri: str | None = None,
    threads: int = 1,
) -> dict[str, Any]:
    """Train one run into ``out_dir/<name>/`` and return its ground truth (labels.json entry)."""
    import torch

    from proxydiag.lab.grpo import GRPOConfig, train
    from proxydiag.lab.sink import MetricSink

    torch.set_num_threads(threads)
    torch.manual_seed(spec.seed)
    run_dir = out_dir / spec.name
    run_dir.mkdir(parents=True, exist_ok=True)
    fault = FaultSpec(spec.fault, spec.fault_step)
    learner, kept = _build(spec, cache_dir)
    full_params = MoEPolicy(spec.model).total_params()
    sidecar: dict[str, Any] = {
        "name": spec.name,
        "role": "full" if kept is None else "proxy",
        "group": spec.group,
        "seed": spec.seed,
        "experts_kept": spec.experts_kept,
        "experts_total": spec.model.n_experts,
        "precision": spec.precision,
        # relative cost per step: parameters held (memory/devices), the cost pruning cuts
        "cost_per_step": round(learner.total_params() / full_params, 4),
        "params": {
            "fault": spec.fault,
            "fault_step": spec.fault_step,
            "steps": spec.steps,
            "replay": spec.replay or spec.fault == "replay_off",
            "active_params_per_token": learner.active_params_per_token(),
            "total_params": learner.total_params(),
            "kept_experts": kept,
            "model": spec.model.to_dict(),
        },
    }
    sink = MetricSink(run_dir, run_name=spec.name, mlflow_uri=mlflow_uri, params=sidecar["params"])
    try:
        cfg = GRPOConfig(
            steps=spec.steps,
            precision=spec.precision,
            fault=fault,
            seed=spec.seed,
            replay=spec.replay,
        )
        train(learner, copy.deepcopy(learner), cfg, sink)
    finally:
        sink.close()
    (run_dir / "proxydiag.json").write_text(json.dumps(sidecar, indent=2), encoding="utf-8")
    truth = {
        "path": spec.name,
        "format": "tensorboard",
        "naming": "verl",
        "role": sidecar["role"],
        "group": spec.group,
        "seed": spec.seed,
        "experts_kept": spec.experts_kept,
        "label": fault.label,
        "onset_step": None if fault.name == "none" else spec.fault_step,
        "variant": spec.fault,
        "log_interval": 1,
    }
    if fault.precision_kind is not None:
        truth["precision_kind"] = fault.precision_kind
    (run_dir / DONE).write_text(json.dumps(truth), encoding="utf-8")
    return truth


def small(spec: LabRun) -> LabRun:
    """A seconds-long version of ``spec`` for tests."""
    return replace(
        spec,
        steps=min(spec.steps, 12),
        pretrain_steps=30,
        model=replace(spec.model, d_model=32, d_expert=32),
    )
