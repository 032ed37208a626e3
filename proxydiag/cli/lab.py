"""``proxydiag lab run|suite``: real tiny MoE RL runs (needs the ``proxydiag[lab]`` extra)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from proxydiag.cli._app import out, sub_app
from proxydiag.cli._groups import command
from proxydiag.errors import ConfigError

lab_app = sub_app("lab", "Real tiny MoE GRPO runs with proxies and injected faults.")

OutOpt = Annotated[Path, typer.Option("-o", "--out", help="output directory")]


@dataclass(frozen=True)
class RunOptions:
    """The options of ``lab run`` that make its :class:`~proxydiag.lab.runner.LabRun`."""

    fault: Annotated[
        str,
        typer.Option(
            help="none, fp16_static_scale, lr_blowup, policy_collapse, bf16_sampler, "
            "fp8_sampler, stale_sync, partial_sync, bf16_increment"
        ),
    ] = "none"
    fault_step: Annotated[int, typer.Option(help="step the fault starts")] = 60
    experts_kept: Annotated[int, typer.Option(help="experts kept per layer (8 = full model)")] = 8
    seed: Annotated[int, typer.Option()] = 0
    steps: Annotated[int, typer.Option(help="GRPO steps")] = 150
    precision: Annotated[str, typer.Option(help="learner gradients: fp32 | fp16")] = "fp32"


@command(lab_app, "run")
def lab_run(
    output: OutOpt,
    options: RunOptions = RunOptions(),
    mlflow_uri: Annotated[
        str | None, typer.Option(help="also log to this MLflow tracking URI")
    ] = None,
) -> None:
    """Train one run into OUT/<name>/ (TensorBoard events + proxydiag.json sidecar)."""
    from proxydiag.lab import require_torch

    require_torch()
    from proxydiag.lab.injection import FAULTS
    from proxydiag.lab.runner import LabRun, run_lab

    fault, precision, experts_kept = options.fault, options.precision, options.experts_kept
    if fault not in FAULTS:
        raise ConfigError(f"--fault {fault!r} is unknown; use one of {', '.join(FAULTS)}")
    if precision not in ("fp32", "fp16"):
        raise ConfigError(f"--precision {precision!r} is unknown; use fp32 or fp16")
    if not 1 <= experts_kept <= 8:
        raise ConfigError(f"--experts-kept must be 1..8, got {experts_kept}")
    spec = LabRun(**asdict(options))
    truth = run_lab(
        spec, output, cache_dir=output / ".pretrained", mlflow_uri=mlflow_uri, threads=2
    )
    out.print(f"{output / spec.name}  label={truth['label']} onset={truth['onset_step']}")


@lab_app.command("suite")
def lab_suite(
    output: OutOpt,
    faults: Annotated[
        str | None, typer.Option(help="comma-separated faults (default: all kinds)")
    ] = None,
    steps: Annotated[int, typer.Option(help="GRPO steps per run")] = 150,
    workers: Annotated[int, typer.Option(help="parallel runs (one core each)")] = 2,
) -> None:
    """The full-vs-proxy matrix with seeds; resumable; writes OUT/labels.json."""
    from proxydiag.lab import require_torch

    require_torch()
    from proxydiag.lab.injection import FAULTS
    from proxydiag.lab.suite import DEFAULT_FAULTS, matrix, run_suite

    chosen = tuple(f.strip() for f in faults.split(",")) if faults else DEFAULT_FAULTS
    bad = [f for f in chosen if f not in FAULTS]
    if bad:
        raise ConfigError(f"--faults: unknown {bad}; use {', '.join(FAULTS)}")
    labels = run_suite(output, runs=matrix(faults=chosen, steps=steps), workers=workers)
    out.print(f"wrote {labels}")
