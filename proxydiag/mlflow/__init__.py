"""Writing results to MLflow: the sink logs a diagnosis or comparison (tags, metrics, the HTML
report as an artifact) to its run's MLflow run, after the store kept it; ``sync`` pushes what
the store still holds as pending. Reading runs from MLflow is :mod:`proxydiag.ingest.mlflow`."""
