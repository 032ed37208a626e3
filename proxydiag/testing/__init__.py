"""Fixtures for users' own tests: the plug-in contract checks every registered reader,
dialect, detector, fidelity test, aligner and writer passes (``contracts``), and a throwaway
MLflow tracking server on 127.0.0.1 (``mlflow_server``)."""
