"""``proxydiag lab run|suite``: real tiny MoE RL runs (needs the ``proxydiag[lab]`` extra)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from proxydiag.cli._app import out, sub_app
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    ExpertsKeptOpt,
    FaultStepOpt,
    Fleet,
    FullSeedsOpt,
    LabFault,
    LabFaultOpt,
    LabFaultsOpt,
    LabPrecision,
    LabPrecisionOpt,
    LabReplayOpt,
    LogToMlflowOpt,
    OutputOpt,
    ProxiesOpt,
    SeedOpt,
    StepsOpt,
    TrackingOpt,
)
from proxydiag.errors import ConfigError

lab_app = sub_app("lab", "Real tiny MoE GRPO runs with proxies and injected faults.")


@dataclass(frozen=True)
class RunOptions:
    """The options of ``lab run`` that make its :class:`~proxydiag.lab.runner.LabRun`."""

    fault: LabFaultOpt = LabFault.none
    fault_step: FaultStepOpt = 60
    experts_kept: ExpertsKeptOpt = 8
    seed: SeedOpt = 0
    steps: StepsOpt = 150
    precision: LabPrecisionOpt = LabPrecision.fp32
    routing_replay: LabReplayOpt = False


@command(lab_app, "run")
def lab_run(
    output: OutputOpt,
    options: RunOptions = RunOptions(),
    log_to_mlflow: LogToMlflowOpt = False,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Train one run into OUTPUT/<name>/ (TensorBoard events + proxydiag.json sidecar); with
    --log-to-mlflow, also into MLflow at --tracking-uri."""
    import os

    from proxydiag.lab import require_torch

    require_torch()
    from proxydiag.lab.runner import LabRun, run_lab

    uri = (tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")) if log_to_mlflow else None
    if log_to_mlflow and not uri:
        raise ConfigError("--log-to-mlflow needs --tracking-uri URI (or MLFLOW_TRACKING_URI)")
    fields = asdict(options)
    replay = fields.pop("routing_replay")
    spec = LabRun(**fields, replay=replay)
    truth = run_lab(spec, output, cache_dir=output / ".pretrained", mlflow_uri=uri, threads=2)
    out.print(f"{output / spec.name}  label={truth['label']} onset={truth['onset_step']}")


@command(lab_app, "suite")
def lab_suite(
    output: OutputOpt,
    faults: LabFaultsOpt = None,
    steps: StepsOpt = 150,
    full_seeds: FullSeedsOpt = 3,
    proxies: ProxiesOpt = True,
    fleet: Fleet = Fleet(),
) -> None:
    """The full-vs-proxy matrix with seeds; resumable; writes OUTPUT/labels.json. Runs go to
    --workers processes (one core each) or Ray tasks (--ray). A replay_off fault brings its
    healthy control (none with routing replay)."""
    from proxydiag.lab import require_torch

    require_torch()
    from proxydiag.lab.injection import FAULTS
    from proxydiag.lab.suite import DEFAULT_FAULTS, matrix, run_suite

    chosen = tuple(f.strip() for f in faults.split(",")) if faults else DEFAULT_FAULTS
    bad = [f for f in chosen if f not in FAULTS]
    if bad:
        raise ConfigError(f"--faults: unknown {bad}; use {', '.join(FAULTS)}")
    runs = matrix(faults=chosen, steps=steps, full_seeds=tuple(range(full_seeds)), proxies=proxies)
    labels = run_suite(output, runs=runs, executor=fleet.executor())
    out.print(f"wrote {labels}")
