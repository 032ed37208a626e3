"""The fidelity tests: one statistic per module, each a
:class:`~proxydiag.fidelity.contract.FidelityTest` (``NAME``, ``score(...)``), registered in
:data:`proxydiag.fidelity.api.TESTS`."""
