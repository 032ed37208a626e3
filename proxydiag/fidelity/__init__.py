"""Proxy fidelity: did the proxy run reproduce the full run's dynamics and fault?

One statistical test per module, each ``score(full_runs, proxy, grid, *, ctx) -> TestResult``:
:mod:`~proxydiag.fidelity.tests.trend`, :mod:`~proxydiag.fidelity.tests.shape`,
:mod:`~proxydiag.fidelity.tests.volatility`, :mod:`~proxydiag.fidelity.tests.increments`,
:mod:`~proxydiag.fidelity.tests.level` (reported, not scored); run-level
:mod:`~proxydiag.fidelity._symptom_order` (the order of the symptoms) and
:mod:`~proxydiag.fidelity.fault_match` (class and onset of the fault); scores relative to the
seed baseline in :mod:`~proxydiag.fidelity._scoring`; the verdict rules in
:mod:`~proxydiag.fidelity._aggregate`; the entry point :func:`proxydiag.fidelity.api.compare`.
"""
