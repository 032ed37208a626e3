"""Where a lab run logs: TensorBoard (torch's SummaryWriter) and, optionally, MLflow."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


class MetricSink:
    """Logs one dict of scalars per step to TensorBoard and optionally to an MLflow run."""

    def __init__(
        self,
        out_dir: Path,
        *,
        run_name: str,
        mlflow_uri: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(out_dir))
        self.mlflow_run: Any = None
        if mlflow_uri:
            from mlflow.tracking import MlflowClient

            self.client = MlflowClient(tracking_uri=mlflow_uri)
            exp = self.client.get_experiment_by_name("proxydiag-lab")
            exp_id = exp.experiment_id if exp else self.client.create_experiment("proxydiag-lab")
            self.mlflow_run = self.client.create_run(exp_id, run_name=run_name)
            for key, value in (params or {}).items():
                self.client.log_param(self.mlflow_run.info.run_id, key, str(value)[:500])

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        if self.mlflow_run is not None:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            batch = [Metric(k, float(v), now, step) for k, v in metrics.items()]
            self.client.log_batch(self.mlflow_run.info.run_id, metrics=batch)

    def close(self) -> None:
        self.writer.close()
        if self.mlflow_run is not None:
            self.client.set_terminated(self.mlflow_run.info.run_id)
