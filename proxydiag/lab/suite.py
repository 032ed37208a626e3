"""The full-vs-proxy matrix with seeds: resumable (finished runs are skipped), on local
workers or Ray (a fleet executor)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from proxydiag.errors import LabError
from proxydiag.fleet import make_executor
from proxydiag.fleet.executor import Executor
from proxydiag.lab.runner import DONE, LabRun, run_lab

DEFAULT_FAULTS = (
    "none",
    "fp16_static_scale",
    "lr_blowup",
    "fp8_sampler",
    "bf16_increment",
    "stale_sync",
)
KEEP = (8, 4, 2, 1)
FULL_SEEDS = (0, 1, 2)


def matrix(
    *,
    faults: tuple[str, ...] = DEFAULT_FAULTS,
    steps: int = 150,
    full_seeds: tuple[int, ...] = FULL_SEEDS,
    proxies: bool = True,
) -> list[LabRun]:
    """Per fault, the full model at ``full_seeds`` and (with ``proxies``) one proxy per kept
    expert count, the fault at 40% of the run. A ``replay_off`` fault brings its healthy
    control: ``none`` with routing replay the whole run (``none-fp32-r3``)."""
    runs = []
    groups = [(f, False) for f in faults]
    if "replay_off" in faults:
        groups.append(("none", True))
    for fault, replay in groups:
        precision = "fp16" if fault == "fp16_static_scale" else "fp32"
        base = LabRun(
            fault=fault,
            precision=precision,
            steps=steps,
            fault_step=steps * 2 // 5,
            replay=replay,
        )
        runs += [replace(base, seed=s) for s in full_seeds]
        if proxies:
            runs += [replace(base, experts_kept=k) for k in KEEP if k != base.model.n_experts]
    return runs


def _one(args: tuple[LabRun, Path, Path]) -> dict[str, Any]:
    spec, out, cache = args
    return run_lab(spec, out, cache_dir=cache)


def run_suite(out: Path, *, runs: list[LabRun], executor: Executor | None = None) -> Path:
    """Run what is not finished yet on ``executor`` (default: two local workers), then write
    ``labels.json``; returns its path. A run that failed is left out of the labels and named
    in a :class:`~proxydiag.errors.LabError` raised after the others finished (a re-run
    picks up only what is not done)."""
    out.mkdir(parents=True, exist_ok=True)
    cache = out / ".pretrained"
    todo = [r for r in runs if not (out / r.name / DONE).exists()]
    # pre-train once (cached) before fanning out, so workers do not race on the cache
    if todo:
        import torch

        from proxydiag.lab.pretrain import cache_key, pretrain

        torch.set_num_threads(1)  # OpenMP threads spin badly on a loaded machine

        # one per distinct pre-training: the checkpoint cache's own key
        inputs = {cache_key(r.model, r.pretrain_seed, r.pretrain_steps): r for r in todo}
        for r in inputs.values():
            pretrain(r.model, seed=r.pretrain_seed, steps=r.pretrain_steps, cache_dir=cache)
    pool = executor if executor is not None else make_executor(workers=2, ray=False)
    failed = [
        f"{o.item[0].name}: {o.reason}"
        for o in pool.map(_one, [(r, out, cache) for r in todo])
        if not o.ok
    ]
    labels = write_labels(out, runs)
    if failed:
        raise LabError(
            f"{len(failed)} lab run(s) failed ({'; '.join(failed)}); {labels} has the rest"
        )
    return labels


def write_labels(out: Path, runs: list[LabRun]) -> Path:
    labels: dict[str, Any] = {"runs": {}, "pairs": {}}
    for r in runs:
        done = out / r.name / DONE
        if done.exists():
            labels["runs"][r.name] = json.loads(done.read_text(encoding="utf-8"))
    for group in sorted({r.group for r in runs}):
        full = [n for n, t in labels["runs"].items() if t["group"] == group and t["role"] == "full"]
        proxies = [
            n for n, t in labels["runs"].items() if t["group"] == group and t["role"] == "proxy"
        ]
        for i, a in enumerate(full):
            for b in full[i + 1 :]:
                labels["pairs"][f"{b}~{a}"] = {"full": [a], "proxy": b, "faithful": True, "why": ""}
        for p in proxies:
            # whether a pruned proxy reproduces the fault is what the lab measures: no truth
            labels["pairs"][f"{p}~{group}"] = {
                "full": full,
                "proxy": p,
                "faithful": None,
                "why": "unknown",
            }
    path = out / "labels.json"
    path.write_text(json.dumps(labels, indent=2), encoding="utf-8")
    return path
