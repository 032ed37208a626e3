"""The failure taxonomy: detectors (one module each) -> events -> one label, onset, root cause.

``api.diagnose(run)`` runs the detectors listed in ``api.DETECTORS`` (``nonfinite``,
``scaler``, ``spikes``, ``divergence``, ``mismatch``, ``drift``; each
``detect(run, cfg) -> list[Event]``) and reads the order of their symptoms in ``taxonomy``.
Parameters live in ``config`` (defaults with cited sources, TOML overrides).
"""
