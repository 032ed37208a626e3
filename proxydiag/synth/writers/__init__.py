"""Writers: one module per format; each writes one run into its own directory.

A writer satisfies :class:`Writer`: ``write(run_dir, sr, *, naming, log_interval) -> Path``
(the file or directory a reader should be pointed at), listed by format in :data:`WRITERS`. Which
namings a format takes is in :mod:`proxydiag.synth.naming`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from proxydiag.registry import Registry
from proxydiag.synth.sim import SynthRun
from proxydiag.synth.writers import deepspeed, megatron, mlflow_files, tabular, tensorboard


class Writer(Protocol):
    """Writes one simulated run in one format."""

    def __call__(self, run_dir: Path, sr: SynthRun, *, naming: str, log_interval: int) -> Path: ...


#: format -> writer (the contract test reads every writer's output back)
WRITERS: Registry[Writer] = Registry(
    "writer",
    {
        "tensorboard": tensorboard.write,
        "mlflow": mlflow_files.write,
        "csv": tabular.write_csv,
        "jsonl": tabular.write_jsonl,
        "megatron": megatron.write,
        "deepspeed": deepspeed.write,
    },
)


def write_run(run_dir: Path, sr: SynthRun, *, fmt: str, naming: str, log_interval: int) -> Path:
    """Write ``sr`` in ``fmt`` under ``run_dir`` plus its ``proxydiag.json`` sidecar."""
    run_dir.mkdir(parents=True, exist_ok=True)
    target = WRITERS[fmt](run_dir, sr, naming=naming, log_interval=log_interval)
    sidecar = {**sr.attrs, "log_interval": log_interval}
    (run_dir / "proxydiag.json").write_text(json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
    return target
