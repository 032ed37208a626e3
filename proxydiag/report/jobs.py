"""Which reports a ``proxydiag report`` invocation writes, and where.

One job per report: plain sources make one diagnosis report; ``--full``/``--proxy`` one
comparison report; ``--store --group`` one comparison report per proxy of the group (or a
diagnosis report when the group has no proxy). File names derived from run names go through
:func:`proxydiag.run.slug`, so they cannot leave the output directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from proxydiag.errors import AnalysisError, StoreError
from proxydiag.report.content import report_runs
from proxydiag.run import Run, slug


@dataclass(frozen=True)
class Job:
    """One report to write: its path and its runs."""

    output: Path
    full: tuple[Run, ...] = ()
    proxy: Run | None = None
    runs: tuple[Run, ...] = ()

    @property
    def every(self) -> tuple[Run, ...]:
        """All the report's runs."""
        return tuple(report_runs(self.full, self.proxy, self.runs))


def output_for(output: Path, *, name: str | None) -> Path:
    """``output`` itself, or ``<stem>-<slug(name)><suffix>`` beside it for one of many reports.

    >>> output_for(Path("out/report.html"), name="../../etc/passwd").as_posix()
    'out/report-etc_passwd.html'
    """
    if name is None:
        return output
    return output.with_name(f"{output.stem}-{slug(name)}{output.suffix}")


def _by_seed(runs: Sequence[Run]) -> list[Run]:
    def key(run: Run) -> tuple[int, str]:
        seed = run.attrs.get("seed")
        return (int(seed) if isinstance(seed, int | float) else 1 << 30, run.name)

    return sorted(runs, key=key)


def comparison_jobs(output: Path, *, full: Sequence[Run], proxies: Sequence[Run]) -> list[Job]:
    """One comparison per proxy (full runs ordered by seed: the first is the reference)."""
    fulls = tuple(_by_seed(full))
    if not proxies:
        return [Job(output, runs=fulls)]
    many = len(proxies) > 1
    return [
        Job(output_for(output, name=p.name if many else None), full=fulls, proxy=p) for p in proxies
    ]


def group_runs(store_path: Path, group: str) -> tuple[list[Run], list[Run]]:
    """Full runs and proxies of ``group`` in the store at ``store_path``."""
    from proxydiag.fleet.analyse import group_fulls
    from proxydiag.store import RunStore

    if not store_path.exists():
        raise StoreError(f"{store_path}: no store here; ingest runs first or pass --store DIR")
    store = RunStore(store_path)
    table = store.runs()
    rows = table.filter(table["group"] == group)
    if rows.height == 0:
        groups = sorted({str(g) for g in table["group"].to_list() if g is not None})
        raise AnalysisError(
            f"{store_path}: no runs in group {group!r}; groups: {', '.join(groups) or 'none'}"
        )
    full = [store.get(run_id) for run_id in group_fulls(rows).get(group, ())]
    proxies = [store.get(r) for r in rows.filter(rows["role"] == "proxy")["run"].to_list()]
    if proxies and not full:
        raise AnalysisError(f"{store_path}: group {group!r} has proxies but no full run")
    return full, proxies
