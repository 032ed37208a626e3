"""An MLflow file store (``mlruns/``), written directly as the text files MLflow keeps.

Layout as ``mlflow.store.tracking.file_store.FileStore`` writes it (checked against
mlflow 3.17; ``MlflowClient`` reads it back, a test checks it): ``mlruns/<exp>/meta.yaml``,
``mlruns/<exp>/<run>/meta.yaml``, ``metrics/<key>`` with ``"<ms> <value> <step>"`` lines (a
``/`` in a key makes subdirectories; ``str(float)`` writes ``nan``/``inf``/``-inf``),
``params/<name>`` and ``tags/<name>`` holding the bare value. The run's metadata goes into
params (experts_kept, precision, ...) and tags (role, group), as a team logging to MLflow
would record it. Ids are derived from the run's name and seed, so output is deterministic.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from proxydiag.synth.sim import SynthRun
from proxydiag.synth.view import logged_rows

EXPERIMENT_ID = "1"
EXPERIMENT_NAME = "proxydiag-synth"
_PARAMS = ("experts_kept", "experts_total", "cost_per_step", "precision", "seed")
_TAGS = ("role", "group")


def _experiment_meta(exp_id: str, name: str, created_ms: int) -> str:
    return (
        f"artifact_location: ./mlruns/{exp_id}\ncreation_time: {created_ms}\n"
        f"experiment_id: '{exp_id}'\nlast_update_time: {created_ms}\n"
        f"lifecycle_stage: active\nname: {name}\n"
    )


def _run_meta(run_id: str, name: str, start_ms: int, end_ms: int) -> str:
    return (
        f"artifact_uri: ./mlruns/{EXPERIMENT_ID}/{run_id}/artifacts\nend_time: {end_ms}\n"
        f"entry_point_name: ''\nexperiment_id: '{EXPERIMENT_ID}'\nlifecycle_stage: active\n"
        f"run_id: {run_id}\nrun_name: {name}\nrun_uuid: {run_id}\nsource_name: ''\n"
        f"source_type: 4\nsource_version: ''\nstart_time: {start_ms}\nstatus: 3\n"
        "tags: []\nuser_id: proxydiag-synth\n"
    )


def write(run_dir: Path, sr: SynthRun, *, naming: str, log_interval: int) -> Path:
    """Write ``run_dir/mlruns`` holding this one run; return the ``mlruns`` directory."""
    rows = logged_rows(sr, naming=naming, fmt="mlflow", log_interval=log_interval)
    root = run_dir / "mlruns"
    start_ms = int(sr.wall_time[0] * 1000)
    end_ms = int(sr.wall_time[-1] * 1000)
    name = sr.scenario.name
    run_id = hashlib.sha1(f"{name}\0{sr.seed}".encode()).hexdigest()[:32]
    for exp_id, exp_name in (("0", "Default"), (EXPERIMENT_ID, EXPERIMENT_NAME)):
        (root / exp_id).mkdir(parents=True, exist_ok=True)
        (root / exp_id / "meta.yaml").write_text(_experiment_meta(exp_id, exp_name, start_ms))
    run = root / EXPERIMENT_ID / run_id
    for sub in ("metrics", "params", "tags", "artifacts"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    (run / "meta.yaml").write_text(_run_meta(run_id, name, start_ms, end_ms))
    attrs = sr.attrs
    for key in _PARAMS:
        (run / "params" / key).write_text(str(attrs[key]))
    for key in _TAGS:
        (run / "tags" / key).write_text(str(attrs[key]))
    (run / "tags" / "mlflow.runName").write_text(name)
    for (key,), part in rows.group_by(["key"], maintain_order=True):
        path = run / "metrics" / str(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        ms = (part["wall_time"].to_numpy() * 1000).astype(np.int64)
        lines = [
            f"{t} {float(v)} {s}"
            for t, v, s in zip(
                ms.tolist(), part["value"].to_list(), part["step"].to_list(), strict=True
            )
        ]
        path.write_text("\n".join(lines) + "\n")
    return root
