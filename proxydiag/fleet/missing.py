"""What the dashboard computes in memory when the store lacks it, spread over an executor.

The same results as the dashboard's one-process path (every run without a diagnosis is
diagnosed, every proxy without a comparison compared against its group's full runs, with the
settings given), but as per-run and per-proxy work items; the store is only read. An
item that fails is said in a warning and left out of the dashboard, as it would be missing
from the store.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from proxydiag.fleet.analyse import compare_all, diagnose_all
from proxydiag.fleet.executor import Executor
from proxydiag.store import RunStore

if TYPE_CHECKING:
    from proxydiag.pipeline import Settings


def missing_results(
    store: RunStore,
    *,
    executor: Executor,
    runs_without: set[str],
    proxies_without: set[str],
    settings: Settings | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Diagnoses of ``runs_without`` (by run id) and Comparisons of ``proxies_without`` (by
    proxy run id) that could be made, with ``settings`` (the defaults for None)."""
    from proxydiag.pipeline import Settings

    settings = settings or Settings()
    diagnoses: dict[str, Any] = {}
    for result in diagnose_all(
        store,
        executor=executor,
        config=settings.diagnose,
        keep=False,
        force=True,
        only=runs_without,
    ):
        if result.reason:
            warnings.warn(f"dashboard: {result.key} not diagnosed ({result.reason})", stacklevel=2)
        else:
            diagnoses[result.key] = result.value
    comparisons: dict[str, Any] = {}
    for result in compare_all(
        store, executor=executor, config=settings, keep=False, force=True, only=proxies_without
    ):
        if result.made is not None:
            comparisons[result.key] = result.made
    return diagnoses, comparisons
