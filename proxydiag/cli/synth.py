"""``proxydiag synth``: write generated runs with ground truth (one scenario, a corpus, or
the sample runs)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import typer

from proxydiag.cli._app import app, out, output_dir
from proxydiag.cli._groups import command
from proxydiag.errors import ConfigError
from proxydiag.synth.scenario import SCENARIOS

_SCENARIO_HELP = (
    "what to write: a scenario (" + ", ".join(SCENARIOS) + "), 'corpus' (a labelled corpus "
    "of --groups groups, each 3 full seeds + 3 proxies) or 'samples' (the sample_runs/ set)"
)


@dataclass(frozen=True)
class SynthOptions:
    """What ``synth`` writes into ``--output``."""

    scenario: Annotated[str, typer.Option("--scenario", "-s", help=_SCENARIO_HELP)] = "corpus"
    fmt: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            "-f",
            help="tensorboard | mlflow | csv | jsonl | megatron | deepspeed "
            "(repeat for a corpus; default: all; a scenario: tensorboard)",
        ),
    ] = None
    naming: Annotated[
        list[str] | None,
        typer.Option(
            "--naming",
            "-n",
            help="verl | openrlhf | trl | slime | megatron | deepspeed "
            "(repeat for a corpus; default: all; a scenario: verl)",
        ),
    ] = None
    seed: Annotated[int, typer.Option("--seed", help="everything is deterministic from it")] = 0
    groups: Annotated[int, typer.Option("--groups", help="groups in a corpus")] = 14
    steps: Annotated[int | None, typer.Option("--steps", help="steps per run")] = None
    log_interval: Annotated[
        int, typer.Option("--log-interval", help="log every k steps (a single scenario)")
    ] = 1
    precision: Annotated[
        str | None,
        typer.Option(
            "--precision", help="fp16 | bf16 (a single scenario; default: the scenario's)"
        ),
    ] = None


@command(app)
def synth(
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write")],
    options: SynthOptions = SynthOptions(),
) -> None:
    """Generate GRPO/PPO runs of an MoE policy, full and proxy, with injected faults."""
    from proxydiag.synth import write_corpus, write_sample_runs

    output_dir(output)
    if options.scenario == "corpus":
        labels = write_corpus(
            output,
            n_groups=options.groups,
            seed=options.seed,
            formats=options.fmt or None,
            namings=options.naming or None,
            steps=options.steps,
        )
    elif options.scenario == "samples":
        labels = write_sample_runs(output)
    else:
        labels = _one(output, options)
    out.print(str(labels), markup=False)


def _one(output: Path, options: SynthOptions) -> Path:
    from proxydiag.synth.scenario import named
    from proxydiag.synth.single import write_single

    scenario, fmt, naming = options.scenario, options.fmt, options.naming
    if scenario not in SCENARIOS:
        raise ConfigError(
            f"unknown scenario {scenario!r}; use one of {', '.join(SCENARIOS)}, corpus or samples"
        )
    if len(fmt or []) > 1 or len(naming or []) > 1:
        raise ConfigError("a single scenario takes one --format and one --naming")
    sc = named(scenario, n_steps=options.steps or 500)
    if options.precision is not None:
        sc = replace(sc, precision=options.precision)
    return write_single(
        output,
        sc,
        seed=options.seed,
        fmt=(fmt or ["tensorboard"])[0],
        naming=(naming or ["verl"])[0],
        log_interval=options.log_interval,
    )
