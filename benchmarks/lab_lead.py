"""How far ahead: the lead of the first live precision alert over a collapse, on lab runs.

``python -m benchmarks.lab_lead --out DIR`` trains the lab's full-model runs of each precision
fault it can inject plus ``lr_blowup`` as a non-precision control (``--seeds``, ``--steps``,
``--fault-step``; resumable: finished runs in ``DIR`` are skipped), then per run:

- **first precision alert**: ``proxydiag watch RUN --replay --every 1 --format json``, the first
  alert whose class is ``precision_fault``; its ``raised_at_step`` (when a live guard would have
  said it) and its ``onset_step``;
- **collapse step**: the onset of the offline diagnosis when its label is ``loss_divergence``
  and the onset is not before the fault by more than the onset tolerance of
  ``proxydiag bench diagnose`` (max(5 steps, 2% of the run));
  otherwise the first step at or after the fault where the reward falls to a quarter of its
  pre-fault level (the median of the ``--window`` steps before the fault), the lab's own
  collapse (docs/lab.md, ``policy_collapse``); a run with neither has no collapse within its
  steps;
- **lead** = collapse step − the alert's ``raised_at_step``; a run alerted that does not
  collapse gives only a lower bound, ``steps`` − the alert's step (censored).

Prints a markdown table per fault (runs, collapses, alert and collapse step as median and
range, lead as median and min–max over seeds) and writes ``DIR/lead.json``. Needs the ``lab``
extra (torch) and minutes of training: run by hand, never in ``make test`` or the bench smoke
(it is not a ``bench_*`` module).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from proxydiag.evaluate.diagnose import tolerance

PRECISION_FAULTS = ("bf16_sampler", "fp8_sampler", "stale_sync", "partial_sync", "bf16_increment")
CONTROL = ("lr_blowup",)
#: the collapse: the reward falls to this fraction of its pre-fault level
COLLAPSE_FRACTION = 0.25


@dataclass(frozen=True)
class Alert:
    raised_at_step: int
    onset_step: int | None


@dataclass(frozen=True)
class RunLead:
    fault: str
    seed: int
    steps: int
    alert: Alert | None
    label: str
    onset: int | None
    #: the collapse step and what decided it ("loss_divergence" onset or "reward_quarter")
    collapse_step: int | None
    collapse_by: str | None

    @property
    def lead(self) -> int | None:
        if self.alert is None or self.collapse_step is None:
            return None
        return self.collapse_step - self.alert.raised_at_step


def first_precision_alert(lines: Iterable[str]) -> Alert | None:
    """The first non-final ``watch --format json`` record whose class is precision_fault."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        rec = json.loads(line)
        if rec.get("final") or rec.get("class") != "precision_fault":
            continue
        return Alert(int(rec["raised_at_step"]), rec.get("onset_step"))
    return None


def reward_collapse_step(
    steps: Sequence[int] | np.ndarray,
    reward: Sequence[float] | np.ndarray,
    fault_step: int,
    *,
    window: int = 10,
    fraction: float = COLLAPSE_FRACTION,
) -> int | None:
    """First step ≥ ``fault_step`` whose reward is at most ``fraction`` × the pre-fault level
    (the median of the last ``window`` finite rewards before the fault); None without one.
    A NaN reward is not a collapse by this rule (it compares false) and is not dropped."""
    s = np.asarray(steps)
    r = np.asarray(reward, dtype=float)
    before = r[(s < fault_step)][-window:]
    before = before[np.isfinite(before)]
    if before.size == 0:
        return None
    level = float(np.median(before))
    if level <= 0:
        return None
    hit = np.nonzero((s >= fault_step) & (r <= fraction * level))[0]
    return int(s[hit[0]]) if hit.size else None


def collapse_of(
    label: str, onset: int | None, reward_step: int | None, fault_step: int, *, steps: int
) -> tuple[int | None, str | None]:
    """The collapse step: the divergence onset when diagnosed so, else the reward's quarter.
    A divergence dated before the injected fault by more than the benchmark's onset tolerance
    (``proxydiag bench diagnose``: max(5 steps, 2% of the run) at one step per point) is not
    one the fault caused: the reward decides then."""
    early = fault_step - tolerance(span_steps=steps, log_interval=1)
    if label == "loss_divergence" and onset is not None and onset >= early:
        return onset, "loss_divergence"
    if reward_step is not None:
        return reward_step, "reward_quarter"
    return None, None


def _med_range(values: list[int]) -> str:
    if not values:
        return "–"
    med = statistics.median(values)
    med_s = f"{med:g}"
    lo, hi = min(values), max(values)
    return med_s if lo == hi else f"{med_s} ({lo}–{hi})"


def summarise(rows: list[RunLead]) -> list[dict[str, object]]:
    """One row per fault, in the order the faults first appear."""
    out = []
    for fault in dict.fromkeys(r.fault for r in rows):
        mine = [r for r in rows if r.fault == fault]
        alerts = [r.alert.raised_at_step for r in mine if r.alert is not None]
        collapses = [r.collapse_step for r in mine if r.collapse_step is not None]
        leads = [r.lead for r in mine if r.lead is not None]
        # alerted runs without a collapse: any collapse comes after the last step, so the
        # lead is at least steps - alert (censored)
        censored = [r.steps - r.alert.raised_at_step for r in mine if r.alert and r.lead is None]
        out.append(
            {
                "fault": fault,
                "runs": len(mine),
                "alerted": len(alerts),
                "collapses": len(collapses),
                "collapse_by": sorted({r.collapse_by for r in mine if r.collapse_by}),
                "alert_step": _med_range(alerts),
                "collapse_step": _med_range(collapses),
                "lead": _med_range(leads),
                "lead_at_least": min(censored) if censored else None,
                "steps": max(r.steps for r in mine),
            }
        )
    return out


def leads_known(t: dict[str, object]) -> bool:
    return t["lead"] != "–"


def markdown(table: list[dict[str, object]]) -> str:
    head = (
        "| fault | runs | precision alert | first alert step | collapses | collapse step "
        "| lead, steps: median (min–max) |\n|---|---|---|---|---|---|---|\n"
    )
    body = ""
    for t in table:
        n = t["runs"]
        by = ", ".join(str(b) for b in t["collapse_by"])  # type: ignore[attr-defined]
        coll = f"{t['collapses']}/{n}" + (f" ({by})" if by else "")
        cstep = t["collapse_step"] if t["collapses"] else f"none within {t['steps']} steps"
        lead = t["lead"] if leads_known(t) else ""
        if t["lead_at_least"] is not None:
            lead += ("; " if lead else "") + f"≥ {t['lead_at_least']} (no collapse yet)"
        lead = lead or "–"
        body += (
            f"| {t['fault']} | {n} | {t['alerted']}/{n} | {t['alert_step']} | {coll} "
            f"| {cstep} | {lead} |\n"
        )
    return head + body


def watch_alert(run_dir: Path) -> Alert | None:
    """Replay ``run_dir`` through ``proxydiag watch`` step by step; stop at the first precision
    alert (the rest of the replay cannot change which alert came first)."""
    cmd = [sys.executable, "-m", "proxydiag", "watch", str(run_dir), "--replay", "--every", "1"]
    cmd += ["--format", "json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            alert = first_precision_alert([line])
            if alert is not None:
                return alert
        return None
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait()


def measure(run_dir: Path, *, fault: str, seed: int, steps: int, fault_step: int) -> RunLead:
    from proxydiag import diagnose, read_run

    run = read_run(str(run_dir))
    d = diagnose(run)
    s, r = run.series("reward")
    step, by = collapse_of(
        d.label, d.onset_step, reward_collapse_step(s, r, fault_step), fault_step, steps=steps
    )
    return RunLead(fault, seed, steps, watch_alert(run_dir), d.label, d.onset_step, step, by)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--faults", nargs="+", default=[*PRECISION_FAULTS, *CONTROL])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--fault-step", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)

    from proxydiag.fleet import make_executor
    from proxydiag.lab.runner import LabRun
    from proxydiag.lab.suite import run_suite

    specs = [
        LabRun(fault=f, fault_step=args.fault_step, steps=args.steps, seed=s)
        for s in args.seeds
        for f in args.faults
    ]
    run_suite(args.out, runs=specs, executor=make_executor(workers=args.workers, ray=False))
    rows = [
        measure(
            args.out / r.name, fault=r.fault, seed=r.seed, steps=r.steps, fault_step=r.fault_step
        )
        for r in sorted(specs, key=lambda r: (args.faults.index(r.fault), r.seed))
    ]
    for r in rows:
        a = r.alert
        print(
            f"{r.fault} s{r.seed}: label {r.label}@{r.onset}; precision alert "
            f"{'none' if a is None else f'@{a.raised_at_step} (onset {a.onset_step})'}; "
            f"collapse {r.collapse_step} ({r.collapse_by}); lead {r.lead}"
        )
    table = summarise(rows)
    (args.out / "lead.json").write_text(
        json.dumps(
            {"runs": [asdict(r) | {"lead": r.lead} for r in rows], "table": table}, indent=2
        ),
        encoding="utf-8",
    )
    print(markdown(table))


if __name__ == "__main__":
    main()
