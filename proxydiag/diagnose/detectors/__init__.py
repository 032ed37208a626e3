"""The detectors: one failure signature per module, each a
:class:`~proxydiag.diagnose.contract.Detector` (``NAME``, ``DECIDES``, ``reads(cfg)``,
``detect(run, cfg)``), registered in :data:`proxydiag.diagnose.api.DETECTORS`."""
