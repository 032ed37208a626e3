"""``compare`` before and after a change, side by side in one benchmark run.

``python -m benchmarks.compare_ab --base REV`` extracts ``proxydiag/`` at git revision ``REV``
into a temporary directory and times :func:`proxydiag.fidelity.api.compare` of a full/proxy
pair of 1,000,000 points each (50 metrics × 20,000 steps, 200 bootstrap resamples; the inputs
of :mod:`benchmarks.bench_compare`) with that code and with the working tree's, alternating
the two in fresh processes round after round, so both see the same machine. Two cases: the
healthy pair of ``bench_compare`` (one phase), and the same runs with a fault at 60% of the
run that every run carries (grad norms climbing four decades; diagnoses given, so the
detectors do not decide): two phases, each tested apart.

Prints the median seconds per call of each and their ratio (the issue's bound: ≤ 1.3×).
``--smoke``: 5 metrics × 2,000 steps, one round.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: runs in the process under test: build the pair with that process's proxydiag, time compare
CHILD = r"""
import sys, time
import numpy as np
from scipy.signal import lfilter
from proxydiag.frame import raw
try:
    from proxydiag.ingest.build import build_run
except ImportError:  # after the layout change
    from proxydiag.run.build import build_run
from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity.api import compare

n_metrics, n_steps, n_full, faulty, repeat = (int(a) for a in sys.argv[1:6])

def make(seed, scale=1.0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n_steps)
    shapes = 1 - np.exp(-t[None, :] / np.linspace(0.05, 0.5, n_metrics)[:, None])
    if faulty:
        shapes = shapes * np.exp(np.clip(t - 0.6, 0, None)[None, :] * 23.0)
    noise = lfilter([np.sqrt(1 - 0.6**2)], [1, -0.6], rng.normal(size=(n_metrics, n_steps)), axis=1)
    values = (shapes * scale + 0.05 * noise).ravel()
    keys = np.repeat([f"metric_{i:02d}" for i in range(n_metrics)], n_steps).tolist()
    steps = np.tile(np.arange(n_steps), n_metrics)
    return build_run(raw(steps, keys, values), name=f"bench-{seed}", source=f"mem://{seed}",
                     fmt="bench")

runs = [make(s) for s in range(n_full)] + [make(99, 0.8)]
label, onset = ("loss_divergence", int(0.6 * n_steps)) if faulty else ("healthy", None)
diags = [Diagnosis(source="", run=r.id, label=label, onset_step=onset, confidence=1.0,
                   root_cause=None, first_step=r.first_step, last_step=r.last_step) for r in runs]
compare(runs[:-1], runs[-1], full_diagnoses=diags[:-1], proxy_diagnosis=diags[-1])  # warm
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(repeat):
    compare(runs[:-1], runs[-1], full_diagnoses=diags[:-1], proxy_diagnosis=diags[-1])
print((time.perf_counter() - t0) / repeat, (time.process_time() - c0) / repeat)
"""


def time_once(
    code_root: Path, *, n_metrics: int, n_steps: int, n_full: int, faulty: bool, repeat: int
) -> tuple[float, float]:
    """Wall and CPU seconds per compare call, in a fresh process importing ``proxydiag`` from
    ``code_root`` (CPU time is the steadier measure on a machine other jobs share)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(n_metrics),
            str(n_steps),
            str(n_full),
            str(int(faulty)),
            str(repeat),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=code_root,
        env={"PYTHONPATH": str(code_root), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision to compare against")
    parser.add_argument("--head", help="git revision to time (default: the working tree)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    n_metrics, n_steps = (5, 2_000) if args.smoke else (50, 20_000)
    rounds = 1 if args.smoke else args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        roots = {
            "base": _extract(args.base, Path(tmp) / "base"),
            "head": _extract(args.head, Path(tmp) / "head") if args.head else ROOT,
        }
        for faulty in (False, True):
            for n_full in (1, 3):
                case = "fault at 60% (2 phases)" if faulty else "healthy (1 phase)"
                label = f"{n_metrics * n_steps:,} + {n_metrics * n_steps:,} points, {n_full} full"
                print(
                    f"{label} seed(s), {case}: "
                    + _side_by_side(
                        roots,
                        rounds=rounds,
                        n_metrics=n_metrics,
                        n_steps=n_steps,
                        n_full=n_full,
                        faulty=faulty,
                    ),
                    flush=True,
                )


def _side_by_side(roots: dict[str, Path], *, rounds: int, **case: int | bool) -> str:
    """Base and head alternated ``rounds`` times; medians of wall and CPU seconds per call."""
    times: dict[str, list[tuple[float, float]]] = {"base": [], "head": []}
    for _ in range(rounds):
        for name, root in roots.items():
            times[name].append(time_once(root, repeat=2, **case))  # type: ignore[arg-type]
    wall = {k: statistics.median(t[0] for t in v) for k, v in times.items()}
    cpu = {k: statistics.median(t[1] for t in v) for k, v in times.items()}
    return (
        f"CPU base {cpu['base']:.3f} s, head {cpu['head']:.3f} s, ratio "
        f"{cpu['head'] / cpu['base']:.2f}x; wall base {wall['base']:.3f} s, head "
        f"{wall['head']:.3f} s, ratio {wall['head'] / wall['base']:.2f}x"
    )


def _extract(rev: str, into: Path) -> Path:
    """``proxydiag/`` at git revision ``rev``, extracted into ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev, "proxydiag"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


if __name__ == "__main__":
    main()
