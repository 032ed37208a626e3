"""The whole pipeline on ``sample_runs/`` (what ``proxydiag demo`` and ``make demo`` run).

One function per stage: :func:`ingest` (a fresh store), :func:`diagnose_all`,
:func:`compare_all` (every proxy against the full seeds of its group), :func:`write_report`
and :func:`write_dashboard`. A stage whose module is not importable (still under
construction) is reported as not available instead of failing the demo.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxydiag.errors import ProxydiagError, StoreError
from proxydiag.ingest import read_runs
from proxydiag.run import Run

if TYPE_CHECKING:
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison
    from proxydiag.pipeline import Analysis
    from proxydiag.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class DemoResult:
    """What the demo produced."""

    runs: list[Run] = field(default_factory=list)
    diagnoses: dict[str, Diagnosis] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    report: Path | None = None
    dashboard: Path | None = None
    #: stage -> why it did not run
    unavailable: dict[str, str] = field(default_factory=dict)


def find_samples(path: Path | None = None) -> Path:
    """``path``, else ``./sample_runs``, else the repository's ``sample_runs/``."""
    for candidate in (path, Path("sample_runs"), ROOT / "sample_runs"):
        if candidate is not None and candidate.is_dir():
            return candidate
    raise StoreError(f"{path or 'sample_runs'}: no sample runs found; pass --samples DIR")


def fresh_store(path: Path) -> RunStore:
    """An empty store at ``path``; an existing *store* there is removed first (nothing else)."""
    from proxydiag.store import RunStore, holds_store

    if path.exists() and any(path.iterdir()):
        if not holds_store(path):
            raise StoreError(f"{path}: exists and is not a proxydiag store; pass another --store")
        shutil.rmtree(path)
    return RunStore(path)


def ingest(samples: Path, store: RunStore) -> list[Run]:
    """Read every run under ``samples`` and put it into ``store``."""
    runs = read_runs(samples)
    with store.writing():
        for run in runs:
            store.put(run)
    return runs


def diagnose_all(runs: list[Run], store: RunStore, analysis: Analysis) -> dict[str, Diagnosis]:
    """Diagnose every run; keep each diagnosis in the store. Keyed by run id."""
    out = {}
    for run in runs:
        d = analysis.diagnose(run)
        store.put_diagnosis(d)
        out[run.id] = d
    return out


def groups(runs: list[Run]) -> dict[str, tuple[list[Run], list[Run]]]:
    """group -> (full runs sorted by seed, proxies sorted by experts kept, most first)."""
    by: dict[str, tuple[list[Run], list[Run]]] = {}
    for run in runs:
        group = str(run.attrs.get("group") or run.name)
        fulls, proxies = by.setdefault(group, ([], []))
        (proxies if run.attrs.get("role") == "proxy" else fulls).append(run)
    for fulls, proxies in by.values():
        fulls.sort(key=lambda r: (int(r.attrs.get("seed") or 0), r.name))
        proxies.sort(key=lambda r: (-int(r.attrs.get("experts_kept") or 0), r.name))
    return by


def compare_all(runs: list[Run], store: RunStore, analysis: Analysis) -> list[Comparison]:
    """Compare every proxy with the full seeds of its group (each run diagnosed once, by
    ``analysis``); keep each comparison."""
    out = []
    for fulls, proxies in groups(runs).values():
        if not fulls:
            continue
        for proxy in proxies:
            c = analysis.compare(fulls, proxy)
            store.put_comparison(c)
            out.append(c)
    return out


def write_report(runs: list[Run], result: DemoResult, out_dir: Path) -> Path:
    """``report.html``: the divergence group's full seeds against its first proxy
    (or the first group with a proxy)."""
    from proxydiag.report.api import report

    by = groups(runs)
    name = (
        "divergence"
        if by.get("divergence", ([], []))[1]
        else next((g for g, (f, p) in by.items() if f and p), None)
    )
    if name is None:
        raise StoreError("no group with a full run and a proxy to report on")
    fulls, proxies = by[name]
    comparison = next((c for c in result.comparisons if c.proxy_run == proxies[0].id), None)
    html = report(full=fulls, proxy=proxies[0], comparison=comparison, diagnoses=result.diagnoses)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.html"
    path.write_text(html, encoding="utf-8")
    return path


def write_dashboard(store: RunStore, out_dir: Path) -> Path:
    """The fleet dashboard of the store, in ``out_dir/dashboard/``."""
    from proxydiag.report.dashboard import write_dashboard as _write

    return _write(store.path, out_dir / "dashboard", analyse=False)


def run_demo(*, samples: Path | None, store_path: Path, out_dir: Path) -> DemoResult:
    """Run every stage that exists; what is missing goes into ``result.unavailable``."""
    store = fresh_store(store_path)
    from proxydiag.pipeline import Analysis

    result = DemoResult(runs=ingest(find_samples(samples), store))
    analysis = Analysis()
    result.diagnoses = _stage(
        result, "diagnose", lambda: diagnose_all(result.runs, store, analysis), {}
    )
    if result.diagnoses or "diagnose" in result.unavailable:
        result.comparisons = _stage(
            result, "compare", lambda: compare_all(result.runs, store, analysis), []
        )
    result.report = _stage(
        result, "report", lambda: write_report(result.runs, result, out_dir), None
    )
    result.dashboard = _stage(result, "dashboard", lambda: write_dashboard(store, out_dir), None)
    return result


def _stage(result: DemoResult, name: str, fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except ProxydiagError as exc:
        result.unavailable[name] = f"{name} failed: {exc}"
        return default
