"""The checked-in ``sample_runs/``: one group per failure variant plus a healthy one.

Each group has a full run, two more full seeds and proxies keeping 50%, 25% and 12.5% of
the experts, in mixed formats and namings. :func:`write_sample_runs` writes the runs, their
sidecars, ``labels.json`` and the folder's ``README.md`` (generated from the same specs and
ground truth, so the text cannot drift from the data).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from proxydiag.errors import ConfigError
from proxydiag.synth.corpus import group_pairs, write_planned
from proxydiag.synth.naming import can_show
from proxydiag.synth.plan import PlannedRun, full_seed, group_scenario, proxy_scenario
from proxydiag.synth.proxy import proxy_fault
from proxydiag.synth.readme import render_readme
from proxydiag.synth.scenario import FaultSpec

Placement = tuple[str, str]  # (format, naming)


@dataclass(frozen=True)
class SampleGroup:
    """One scenario of ``sample_runs/``."""

    name: str
    story: str
    precision: str
    group_seed: int
    n_steps: int
    log_interval: int
    fault: FaultSpec | None
    fulls: tuple[Placement, Placement, Placement]
    #: (experts kept, relation, format, naming) per proxy
    proxies: tuple[tuple[int, str, str, str], ...]


GROUPS: tuple[SampleGroup, ...] = (
    SampleGroup(
        "healthy",
        "A healthy fp16 run: scaler calibration overflows in the first steps, "
        "periodic growth-probe overflows, isolated grad-norm spikes that revert.",
        "fp16",
        101,
        400,
        1,
        None,
        (("tensorboard", "verl"), ("mlflow", "verl"), ("jsonl", "verl")),
        (
            (32, "reproduce", "tensorboard", "verl"),
            (16, "trend", "csv", "verl"),
            (8, "extra", "jsonl", "verl"),
        ),
    ),
    SampleGroup(
        "overflow-fp16",
        "fp16 loss-scaler collapse (Megatron-LM): from the onset every step "
        "overflows, the scale halves down to 1 and iterations are skipped while the loss stays "
        "finite.",
        "fp16",
        202,
        500,
        1,
        FaultSpec("fp16_scaler_collapse", 230),
        (("megatron", "megatron"), ("megatron", "megatron"), ("tensorboard", "megatron")),
        (
            (32, "reproduce", "megatron", "megatron"),
            (16, "late", "tensorboard", "megatron"),
            (8, "miss", "csv", "megatron"),
        ),
    ),
    SampleGroup(
        "overflow-fp16-dschat",
        "fp16 loss-scaler collapse (DeepSpeed-Chat PPO): OVERFLOW! "
        "lines on every step from the onset until DeepSpeed exits at the minimum scale.",
        "fp16",
        813,
        400,
        10,
        FaultSpec("fp16_scaler_collapse", 170),
        (("deepspeed", "deepspeed"), ("deepspeed", "deepspeed"), ("deepspeed", "deepspeed")),
        (
            (32, "reproduce", "deepspeed", "deepspeed"),
            (16, "early", "deepspeed", "deepspeed"),
            (8, "miss", "deepspeed", "deepspeed"),
        ),
    ),
    SampleGroup(
        "overflow-bf16",
        "bf16 non-finite gradients: NaN/inf grad norms on most steps from the "
        "onset (the step is skipped).",
        "bf16",
        303,
        500,
        5,
        FaultSpec("bf16_nonfinite", 260),
        (("jsonl", "openrlhf"), ("csv", "openrlhf"), ("tensorboard", "openrlhf")),
        (
            (32, "reproduce", "jsonl", "openrlhf"),
            (16, "reproduce", "tensorboard", "openrlhf"),
            (8, "early", "mlflow", "openrlhf"),
        ),
    ),
    SampleGroup(
        "divergence",
        "Loss divergence: grad-norm growth that does not revert, then reward "
        "and entropy collapse, KL and clip-fraction blow-up, NaN at the end.",
        "bf16",
        404,
        500,
        1,
        FaultSpec("divergence", 210, 150),
        (("tensorboard", "verl"), ("tensorboard", "verl"), ("mlflow", "verl")),
        (
            (32, "reproduce", "tensorboard", "verl"),
            (16, "dynamics", "mlflow", "verl"),
            (8, "wrong", "csv", "verl"),
        ),
    ),
    SampleGroup(
        "precision-sync-step",
        "Precision fault, step change: a broken weight sync makes the "
        "rollout-vs-learner mismatch jump and learning stall.",
        "bf16",
        505,
        500,
        1,
        FaultSpec("sync_step", 240),
        (("csv", "trl"), ("csv", "trl"), ("tensorboard", "trl")),
        (
            (32, "reproduce", "csv", "trl"),
            (16, "reproduce", "tensorboard", "trl"),
            (8, "miss", "mlflow", "trl"),
        ),
    ),
    SampleGroup(
        "precision-gradual-climb",
        "Precision fault, gradual climb: rounding lag of a "
        "low-precision sampler makes the mismatch climb steadily from the onset.",
        "bf16",
        606,
        500,
        5,
        FaultSpec("gradual_climb", 200),
        (("tensorboard", "slime"), ("tensorboard", "slime"), ("jsonl", "slime")),
        (
            (32, "reproduce", "tensorboard", "slime"),
            (16, "early", "jsonl", "slime"),
            (8, "dynamics", "csv", "slime"),
        ),
    ),
    SampleGroup(
        "precision-climb-divergence",
        "Precision fault that tips into divergence: the "
        "mismatch climbs from the onset and later the run diverges; the root cause and the "
        "onset are the climb's.",
        "bf16",
        707,
        500,
        10,
        FaultSpec("climb_then_divergence", 180),
        (("jsonl", "verl"), ("mlflow", "verl"), ("tensorboard", "verl")),
        (
            (32, "reproduce", "jsonl", "verl"),
            (16, "late", "mlflow", "verl"),
            (8, "miss", "tensorboard", "verl"),
        ),
    ),
)


def planned_runs(group: SampleGroup) -> list[PlannedRun]:
    """The six runs of a sample group."""
    base = group_scenario(
        group.name,
        n_steps=group.n_steps,
        precision=group.precision,
        group_seed=group.group_seed,
        fault=group.fault,
    )
    runs = []
    for k, (fmt, naming) in enumerate(group.fulls):
        runs.append(PlannedRun(full_seed(base, k), k, fmt, naming, group.log_interval))
    for kept, relation, fmt, naming in group.proxies:
        rng = np.random.default_rng(np.random.SeedSequence([group.group_seed, kept]))
        fault = proxy_fault(
            group.fault, relation, n_steps=group.n_steps, precision=group.precision, rng=rng
        )
        sc = proxy_scenario(base, kept=kept, fault=fault, relation=relation)
        runs.append(PlannedRun(sc, 0, fmt, naming, group.log_interval, relation))
    return runs


def write_sample_runs(out_dir: str | Path) -> Path:
    """Write the sample runs, ``labels.json`` and ``README.md`` into ``out_dir``; return labels."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[str, Any]] = {}
    pairs: dict[str, dict[str, Any]] = {}
    for group in GROUPS:
        planned = planned_runs(group)
        for p in planned:
            variant = p.scenario.fault.variant if p.scenario.fault else ""
            if not can_show(p.naming, p.fmt, variant=variant, precision=p.scenario.precision):
                raise ConfigError(f"{p.name}: {p.fmt}/{p.naming} cannot show {variant or 'it'}")
        for p in planned:
            entry = write_planned(out / group.name, p)
            entry["path"] = f"{group.name}/{p.name}"
            runs[p.name] = entry
        pairs.update(group_pairs(planned))
    labels = out / "labels.json"
    labels.write_text(json.dumps({"runs": runs, "pairs": pairs}, indent=1) + "\n")
    stories = {g.name: g.story for g in GROUPS}
    (out / "README.md").write_text(render_readme(stories, runs, pairs))
    return labels
