"""Watch 100 live runs that each append 50 metrics per step (target ≤ 1 ms CPU per run-step).

Runs are generated GRPO runs (:func:`benchmarks.bench_analysis.make_run`: every canonical metric
a real stack logs, padded to 50 metrics), nine healthy for one that diverges. They are fed
step by step, all runs interleaved as a live ``watch`` of many sources would, with a check
every 10 steps (a poll). Reported: CPU per run-step of the watchers, the points they hold at
the end (bounded: the same for a run twice as long), and, side by side, the CPU per step of
re-running offline ``diagnose`` on the whole prefix at every check (one run).
"""

from __future__ import annotations

import time

from benchmarks.bench_analysis import make_run
from benchmarks.common import Context, Row
from proxydiag.diagnose.api import diagnose
from proxydiag.run import Run
from proxydiag.run.rows import steps_of
from proxydiag.watch import Watcher

#: logged steps between checks (a poll of a live source)
CHECK_EVERY = 10


def _watch_all(
    rows: list[list[tuple[int, dict[str, float]]]], *, n_runs: int
) -> tuple[float, int, int]:
    """CPU seconds to watch ``n_runs`` runs (cycling through ``rows``), points held, alerts."""
    watchers = [Watcher(run=f"run{i}", precision="fp16") for i in range(n_runs)]
    n_steps = min(len(r) for r in rows)
    alerts = 0
    start = time.process_time()
    for k in range(n_steps):
        for i, w in enumerate(watchers):
            step, metrics = rows[i % len(rows)][k]
            w.add(step, metrics)
            if k % CHECK_EVERY == CHECK_EVERY - 1:
                alerts += len(w.check())
    spent = time.process_time() - start
    return spent, max(w.held_points for w in watchers), alerts


def _offline_every_check(run: Run, *, n_checks: int) -> float:
    """CPU seconds per step of diagnosing the whole prefix at ``n_checks`` evenly spaced checks."""
    last = run.last_step
    ends = [int(last * (j + 1) / n_checks) for j in range(n_checks)]
    frame = run.frame
    start = time.process_time()
    for end in ends:
        prefix = Run(
            frame.filter(frame["step"] <= end), run.name, dict(run.attrs), dict(run.mapping)
        )
        diagnose(prefix)
    spent = time.process_time() - start
    # the prefixes sampled stand for every check of the run
    return spent / n_checks * (last / CHECK_EVERY) / last


def run(ctx: Context) -> list[Row]:
    n_runs, n_steps = ctx.size(100, 10), ctx.size(2_000, 200)
    base = [make_run("healthy", n_steps=n_steps, n_metrics=50, seed=s) for s in range(9)]
    base.append(make_run("climb_then_divergence", n_steps=n_steps, n_metrics=50, seed=9))
    rows = [list(steps_of(r)) for r in base]
    spent, held, alerts = _watch_all(rows, n_runs=n_runs)
    longer = [list(steps_of(make_run("healthy", n_steps=2 * n_steps, n_metrics=50, seed=0)))]
    _, held_long, _ = _watch_all(longer, n_runs=1)
    per = spent / (n_runs * n_steps)
    offline = _offline_every_check(base[-1], n_checks=ctx.size(20, 4))
    return [
        Row(
            f"watch {n_runs} runs x 50 metrics x {n_steps:,} steps, check every {CHECK_EVERY}",
            "proxydiag",
            [spent],
            points=n_runs * n_steps * 50,
            note=f"{per * 1e3:.3f} ms CPU per run-step (target <= 1); {alerts} alerts "
            f"({n_runs // 10} diverging runs); points held per run {held:,} "
            f"({held_long:,} for a run twice as long)",
        ),
        Row(
            f"watch {n_runs} runs x 50 metrics x {n_steps:,} steps, check every {CHECK_EVERY}",
            "offline diagnose every check",
            [offline * n_runs * n_steps],
            points=n_runs * n_steps * 50,
            note=f"{offline * 1e3:.3f} ms CPU per run-step (estimated from "
            f"{ctx.size(20, 4)} prefixes of one run)",
        ),
    ]


if __name__ == "__main__":
    for row in run(Context(smoke=False, repeat=1)):
        print(row.tool, f"{row.median:.2f} s", row.note)
