"""``proxydiag synth``: write generated runs with ground truth (one scenario, a corpus, or
the sample runs)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from proxydiag.cli._app import app, out, output_dir
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    GroupsOpt,
    LogIntervalOpt,
    MaybeStepsOpt,
    NamingsOpt,
    OutputOpt,
    RunFormatsOpt,
    ScenarioOpt,
    SeedOpt,
    SynthPrecisionOpt,
)
from proxydiag.errors import ConfigError


@dataclass(frozen=True)
class SynthOptions:
    """What ``synth`` writes into ``--output``."""

    scenario: ScenarioOpt = "corpus"
    #: file formats (repeat for a corpus; default: all; a single scenario: tensorboard)
    fmt: RunFormatsOpt = None
    naming: NamingsOpt = None
    seed: SeedOpt = 0
    groups: GroupsOpt = 14
    steps: MaybeStepsOpt = None
    log_interval: LogIntervalOpt = 1
    #: a single scenario's precision (default: the scenario's)
    precision: SynthPrecisionOpt = None


@command(app)
def synth(
    output: OutputOpt,
    options: SynthOptions = SynthOptions(),
) -> None:
    """Generate GRPO/PPO runs of an MoE policy, full and proxy, with injected faults.

    --format and --naming repeat for a corpus (default: all); a single scenario takes one of
    each (default: tensorboard, verl) and --precision (default: the scenario's).
    """
    from proxydiag.synth import write_corpus, write_sample_runs

    output_dir(output)
    if options.scenario == "corpus":
        labels = write_corpus(
            output,
            n_groups=options.groups,
            seed=options.seed,
            formats=[str(f) for f in options.fmt] if options.fmt else None,
            namings=[str(n) for n in options.naming] if options.naming else None,
            steps=options.steps,
        )
    elif options.scenario == "samples":
        labels = write_sample_runs(output)
    else:
        labels = _one(output, options)
    out.print(str(labels), markup=False)


def _one(output: Path, options: SynthOptions) -> Path:
    from proxydiag.synth.scenario import SCENARIOS, named
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
        sc = replace(sc, precision=str(options.precision))
    return write_single(
        output,
        sc,
        seed=options.seed,
        fmt=str(fmt[0]) if fmt else "tensorboard",
        naming=str(naming[0]) if naming else "verl",
        log_interval=options.log_interval,
    )
