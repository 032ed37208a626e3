"""The fidelity-test contract: one statistic of a proxy against the full runs, on one metric.

A fidelity test is a module with ``NAME`` and ``score(full_runs, proxy, grid, *, ctx) ->
TestResult``: ``grid`` is the metric on the common buckets of every run
(:class:`~proxydiag.align.grid.MetricGrid`), ``ctx`` the seed baseline and the shared bootstrap
resamples (:class:`~proxydiag.fidelity.context.MetricContext`). The result's ``score`` is in
[0, 1] relative to the full runs' seed-to-seed noise, with a bootstrap interval. Tests are
listed in :data:`proxydiag.fidelity.api.TESTS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from proxydiag.align.grid import MetricGrid
    from proxydiag.fidelity.context import MetricContext
    from proxydiag.fidelity.result import TestResult
    from proxydiag.run import Run


@runtime_checkable
class FidelityTest(Protocol):
    """One statistic, scored against seed-to-seed noise."""

    NAME: str

    def score(
        self, full_runs: list[Run], proxy: Run, grid: MetricGrid, *, ctx: MetricContext
    ) -> TestResult: ...
