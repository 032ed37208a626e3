"""`write_corpus`: a labelled corpus of full and proxy runs in every format and naming.

Layout: one directory per run (``<out>/<run name>/``) holding the format's files and a
``proxydiag.json`` sidecar, and ``<out>/labels.json`` in the schema of
docs/architecture.md#labelled-corpora-labelsjson. ``labels.json`` is keyed by run name, which is
also the sidecar's ``name`` (so ``Run.name`` of the run read back); ``path`` is the run's directory
relative to ``labels.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError
from proxydiag.synth.naming import FORMATS, NAMINGS
from proxydiag.synth.plan import GROUP_CYCLE, PlannedRun, Planner, why
from proxydiag.synth.proxy import RELATION_PHASES
from proxydiag.synth.scenario import LATER_VARIANTS, PRECISIONS, VARIANT_CLASS
from proxydiag.synth.sim import simulate
from proxydiag.synth.writers import write_run

#: variants in a corpus unless asked otherwise (slow_drift only on request: a drift is
#: reported as an event but is a harder, rarer case than the classes the taxonomy names;
#: policy_collapse only on request: a corpus of a given seed stays the corpus it was, and its
#: own corpora are written with ``variants=["policy_collapse"]``)
#: (export_lag, sync_sawtooth, the routing and master-weight kinds, from_start,
#: on_policy_nonzero and resume_shift too: the precision kinds' corpora ask for them)
DEFAULT_VARIANTS = tuple(v for v in VARIANT_CLASS if v not in ("slow_drift", *LATER_VARIANTS))


def write_corpus(
    out_dir: str | Path,
    *,
    n_groups: int,
    seed: int,
    formats: Sequence[str] | None = None,
    namings: Sequence[str] | None = None,
    log_intervals: Sequence[int] = (1, 5, 10),
    precisions: Sequence[str] = ("fp16", "bf16"),
    steps: int | None = None,
    variants: Sequence[str] | None = None,
) -> Path:
    """Write ``n_groups`` groups (3 full seeds + 3 proxies each) and return ``labels.json``.

    Parameters
    ----------
    out_dir
        Directory to write into (created; existing run directories are overwritten).
    n_groups
        Number of groups; 14 groups make 84 runs.
    seed
        Everything is deterministic from this seed.
    formats, namings
        Restrict the formats (``tensorboard, mlflow, csv, jsonl, megatron, deepspeed``) and
        framework namings (``verl, openrlhf, trl, slime, megatron, deepspeed``).
    log_intervals
        Log intervals cycled over groups (a run logged every k steps has rows at multiples of k).
    precisions
        ``fp16`` and/or ``bf16``.
    steps
        Steps per run (default: 300–600, drawn per group).
    variants
        Fault variants to use (default: all but ``slow_drift`` and ``policy_collapse``).

    Examples
    --------
    >>> import tempfile, json
    >>> labels = write_corpus(tempfile.mkdtemp(), n_groups=1, seed=0, steps=120)
    >>> data = json.loads(labels.read_text())
    >>> len(data["runs"]), len(data["pairs"])
    (6, 6)
    """
    _check(n_groups, formats, namings, log_intervals, precisions, steps, variants)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    planner = Planner(
        seed=seed,
        formats=formats or FORMATS,
        namings=namings or tuple(NAMINGS),
        log_intervals=log_intervals,
        precisions=precisions,
        steps=steps,
        variants=variants or DEFAULT_VARIANTS,
    )
    runs: dict[str, dict[str, Any]] = {}
    pairs: dict[str, dict[str, Any]] = {}
    for g in range(n_groups):
        group = planner.group(g)
        for planned in group:
            runs[planned.name] = write_planned(out, planned)
        pairs.update(group_pairs(group))
    path = out / "labels.json"
    path.write_text(json.dumps({"runs": runs, "pairs": pairs}, indent=1) + "\n")
    return path


def write_planned(out: Path, planned: PlannedRun) -> dict[str, Any]:
    """Simulate and write one planned run; return its ``labels.json`` entry."""
    sr = simulate(planned.scenario, seed=planned.seed)
    write_run(
        out / planned.name,
        sr,
        fmt=planned.fmt,
        naming=planned.naming,
        log_interval=planned.log_interval,
    )
    sc = planned.scenario
    return {
        "path": planned.name,
        "format": planned.fmt,
        "naming": planned.naming,
        "role": sc.role,
        "group": sc.group,
        "seed": planned.seed,
        "experts_kept": sc.experts_kept,
        "experts_total": sc.experts_total,
        "precision": sc.precision,
        "label": sr.truth.label,
        "onset_step": sr.truth.onset_step,
        "variant": sr.truth.variant,
        "log_interval": planned.log_interval,
        "n_steps": sc.n_steps,
        "relation": planned.relation,
    }


def group_pairs(group: list[PlannedRun]) -> dict[str, dict[str, Any]]:
    """Pairs of a group: every proxy against the full seeds, and each seed against the others.

    A pair's optional ``phases`` says which phases of its comparison are faithful (the truth of
    ``bench compare``'s per-phase accuracy; a phase not named is not scored)."""
    fulls = [p.name for p in group if p.scenario.role == "full"]
    pairs: dict[str, dict[str, Any]] = {}
    for p in group:
        if p.scenario.role == "proxy":
            reason = why(p.relation)
            pairs[p.name] = {
                "full": fulls,
                "proxy": p.name,
                "faithful": reason == "",
                "why": reason,
            }
            if p.relation in RELATION_PHASES:
                pairs[p.name]["phases"] = dict(RELATION_PHASES[p.relation])
        else:
            others = [f for f in fulls if f != p.name]
            pairs[f"{p.name}-vs-seeds"] = {
                "full": others,
                "proxy": p.name,
                "faithful": True,
                "why": "",
                "phases": dict(RELATION_PHASES["reproduce"]),
            }
    return pairs


def _check(
    n_groups: int,
    formats: Sequence[str] | None,
    namings: Sequence[str] | None,
    log_intervals: Sequence[int],
    precisions: Sequence[str],
    steps: int | None,
    variants: Sequence[str] | None,
) -> None:
    if n_groups < 1:
        raise ConfigError(f"n_groups must be >= 1, got {n_groups}")
    for label, given, allowed in (
        ("format", formats or (), FORMATS),
        ("naming", namings or (), tuple(NAMINGS)),
        ("precision", precisions, PRECISIONS),
        ("variant", variants or (), tuple(VARIANT_CLASS)),
    ):
        bad = [g for g in given if g not in allowed]
        if bad:
            raise ConfigError(f"unknown {label} {bad[0]!r}; use one of {', '.join(allowed)}")
    if any(k < 1 for k in log_intervals):
        raise ConfigError("log intervals must be >= 1")
    if steps is not None and steps < 100:
        raise ConfigError(f"steps must be >= 100, got {steps}")


__all__ = ["DEFAULT_VARIANTS", "GROUP_CYCLE", "write_corpus"]
