"""The command line's grammar: every option of every command, declared once, here.

A meaning has one spelling everywhere (``--output/-o`` for where a command writes,
``--tracking-uri`` for the MLflow server, ``--format/-f`` for how results are printed ...), one
help line and, where it takes a fixed set of values, one :class:`~enum.StrEnum` whose values the
parser checks (a bad ``--format`` is a usage error naming the choices, exit 2, before any work).
Commands take these ``Annotated`` types as parameters; options several commands share come as
a group (a dataclass spread into its fields by :func:`proxydiag.cli._groups.grouped`):
:class:`Fleet` (where work items run) and :class:`Destination` (where results go).

Spellings of earlier releases are read for one release more: :data:`DEPRECATED` maps each to
its words today; :func:`modernise` rewrites a command line's words and says so on stderr.
``tests/cli/test_grammar.py`` walks every command and fails on a second spelling of a meaning,
on an option declared outside this module, and on a listed choice the parser does not check.

This module imports no analysis library: ``--help`` and usage errors stay fast.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from proxydiag.fleet.executor import Executor

# --- choices ---------------------------------------------------------------------------------


class TextFormat(StrEnum):
    """How a result is printed."""

    text = "text"
    json = "json"
    markdown = "markdown"


class LineFormat(StrEnum):
    """How a stream of results is printed: lines of text, or JSON Lines."""

    text = "text"
    json = "json"


class ReportFormat(StrEnum):
    """The report's document format."""

    html = "html"
    markdown = "markdown"
    json = "json"


class Align(StrEnum):
    """The axis runs are compared on."""

    step = "step"
    tokens = "tokens"
    samples = "samples"
    progress = "progress"


class Precision(StrEnum):
    """A run's numeric precision, as runs and sidecars spell it."""

    fp16 = "fp16"
    bf16 = "bf16"
    fp32 = "fp32"
    fp8 = "fp8"
    tf32 = "tf32"


class SynthPrecision(StrEnum):
    """The mixed precisions the generator simulates."""

    fp16 = "fp16"
    bf16 = "bf16"


class LabPrecision(StrEnum):
    """The lab learner's gradient precision."""

    fp32 = "fp32"
    fp16 = "fp16"


class Tier(StrEnum):
    """An alert's tier."""

    warning = "warning"
    critical = "critical"


class Role(StrEnum):
    """A run's role in a group."""

    full = "full"
    proxy = "proxy"


class RunFormat(StrEnum):
    """The file formats the generator writes (``proxydiag.synth.naming.FORMATS``)."""

    tensorboard = "tensorboard"
    mlflow = "mlflow"
    csv = "csv"
    jsonl = "jsonl"
    megatron = "megatron"
    deepspeed = "deepspeed"


class Naming(StrEnum):
    """The metric spellings the generator writes (``proxydiag.synth.naming.NAMINGS``)."""

    verl = "verl"
    openrlhf = "openrlhf"
    trl = "trl"
    slime = "slime"
    megatron = "megatron"
    deepspeed = "deepspeed"


class PruneMethod(StrEnum):
    """How ``proxy build`` picks the experts kept (``proxydiag.proxy.METHODS``)."""

    kmeans = "kmeans"
    frequency = "frequency"
    reap = "reap"


class LabFault(StrEnum):
    """The faults the lab injects (``proxydiag.lab.injection.FAULTS``)."""

    none = "none"
    fp16_static_scale = "fp16_static_scale"
    lr_blowup = "lr_blowup"
    policy_collapse = "policy_collapse"
    bf16_sampler = "bf16_sampler"
    fp8_sampler = "fp8_sampler"
    stale_sync = "stale_sync"
    partial_sync = "partial_sync"
    bf16_increment = "bf16_increment"
    stale_router = "stale_router"
    replay_off = "replay_off"
    lost_master_weights = "lost_master_weights"


# --- spellings of earlier releases -------------------------------------------------------------

#: an earlier spelling -> the words that mean it today (read for one release more)
DEPRECATED: dict[str, tuple[str, ...]] = {
    "--out": ("--output",),
    "--mlflow-uri": ("--log-to-mlflow", "--tracking-uri"),
}


def modernise(words: list[str]) -> tuple[list[str], list[str]]:
    """``words`` with earlier spellings replaced, and one deprecation line per spelling met.

    Words after ``--`` are arguments, never options, and are left alone.

    >>> modernise(["lab", "run", "--out", "d", "--mlflow-uri=http://h"])[0]
    ['lab', 'run', '--output', 'd', '--log-to-mlflow', '--tracking-uri=http://h']
    >>> modernise(["diagnose", "--", "--out"])[0]
    ['diagnose', '--', '--out']
    """
    result: list[str] = []
    said: list[str] = []
    for i, word in enumerate(words):
        if word == "--":
            result += words[i:]
            break
        old, eq, value = word.partition("=")
        new = DEPRECATED.get(old)
        if new is None:
            result.append(word)
            continue
        result += [*new[:-1], new[-1] + eq + value]
        line = f"{old} is deprecated; use {' '.join(new)} (the old spelling goes in 0.3)"
        if line not in said:
            said.append(line)
    return result, said


# --- options -----------------------------------------------------------------------------------


def _export_tracking_uri(value: str | None) -> str | None:
    """``--tracking-uri`` also applies to reading ``runs:/`` sources, as MLFLOW_TRACKING_URI."""
    if value:
        os.environ["MLFLOW_TRACKING_URI"] = value
    return value


def _store() -> Any:
    return typer.Option("--store", help="the run store's directory (env PROXYDIAG_STORE)")


def _format() -> Any:
    return typer.Option("--format", "-f", help="how results are printed")


def _fail_on() -> Any:
    return typer.Option(
        "--fail-on",
        help="exit 1 when a result is one of CLASS[,CLASS]: a failure label (gradient_overflow, "
        "loss_divergence, precision_fault) or a proxy verdict (unfaithful; partial means "
        "partial or worse)",
    )


def _steps() -> Any:
    return typer.Option("--steps", min=1, help="training steps per run")


def _seed() -> Any:
    return typer.Option("--seed", help="random seed (everything is deterministic from it)")


def _workers() -> Any:
    return typer.Option(
        "--workers", min=1, help="local worker processes for the work items (1: in-process)"
    )


OutputOpt = Annotated[
    Path,
    typer.Option(
        "--output", "-o", help="where the command writes (a folder; report: a file, '-' stdout)"
    ),
]
#: the store's directory; DEFAULT_STORE where a command always has one
DEFAULT_STORE = Path(os.environ.get("PROXYDIAG_STORE", "proxydiag-store"))
StoreOpt = Annotated[Path, _store()]
#: ... where the store is optional (results are kept there when given)
MaybeStoreOpt = Annotated[Path | None, _store()]
AliasesOpt = Annotated[
    Path | None, typer.Option("--aliases", help="TOML file that adds or overrides metric aliases")
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="TOML file of settings: detector, test and watch parameters"),
]
TrackingOpt = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        help="MLflow tracking URI (default: MLFLOW_TRACKING_URI)",
        callback=_export_tracking_uri,
    ),
]
LogToMlflowOpt = Annotated[
    bool,
    typer.Option(
        "--log-to-mlflow",
        help="log results to MLflow: a run's own MLflow run, else --mlflow-experiment",
    ),
]
#: the MLflow experiment a command reads runs from, or writes results of other runs into
MlflowExperimentOpt = Annotated[
    str | None,
    typer.Option(
        "--mlflow-experiment",
        help="MLflow experiment: the runs to read, or where results of runs not from MLflow go",
    ),
]
FilterOpt = Annotated[
    str,
    typer.Option(
        "--filter", help="MLflow filter of the experiment's runs, e.g. \"tags.role = 'proxy'\""
    ),
]
TextFormatOpt = Annotated[TextFormat, _format()]
LineFormatOpt = Annotated[LineFormat, _format()]
ReportFormatOpt = Annotated[ReportFormat, _format()]
RunFormatsOpt = Annotated[list[RunFormat] | None, _format()]
FailOnOpt = Annotated[str | None, _fail_on()]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="redo or replace what is already there"),
]
FullOpt = Annotated[
    list[str] | None,
    typer.Option("--full", help="full run (repeat for seeds; the first is the reference)"),
]
ProxyOpt = Annotated[str | None, typer.Option("--proxy", help="proxy run")]
GroupOpt = Annotated[
    str | None,
    typer.Option("--group", help="the group: proxies and the full runs they are compared with"),
]
RoleOpt = Annotated[
    Role | None,
    typer.Option("--role", help="role of every run read (overrides sidecars and tags)"),
]
AlignOpt = Annotated[Align, typer.Option("--align", help="the axis runs are compared on")]
LockTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--lock-timeout",
        envvar="PROXYDIAG_LOCK_TIMEOUT_S",
        min=0,
        help="seconds to wait for another process writing to the store",
    ),
]
AllRunsOpt = Annotated[
    bool, typer.Option("--all", help="every run in --store (and keep the results there)")
]
AnalyseOpt = Annotated[
    bool,
    typer.Option(
        "--analyse/--no-analyse", help="diagnose/compare in memory what the store has no result for"
    ),
]
EveryOpt = Annotated[
    int, typer.Option("--every", min=1, help="replaying: logged steps fed per check")
]
OracleOpt = Annotated[
    bool,
    typer.Option("--oracle/--no-oracle", help="also run offline diagnose on every prefix"),
]
SamplesOpt = Annotated[
    Path | None,
    typer.Option("--samples", help="folder of runs (default: ./sample_runs or the repository's)"),
]
SeedOpt = Annotated[int, _seed()]
StepsOpt = Annotated[int, _steps()]
MaybeStepsOpt = Annotated[int | None, _steps()]

# synth
ScenarioOpt = Annotated[
    str,
    typer.Option(
        "--scenario",
        "-s",
        help="what to write: 'corpus' (a labelled corpus of --groups groups, each 3 full seeds "
        "+ 3 proxies), 'samples' (the sample_runs/ set) or one scenario (a wrong name lists them)",
    ),
]
NamingsOpt = Annotated[
    list[Naming] | None,
    typer.Option(
        "--naming",
        "-n",
        help="metric spellings (repeat for a corpus; default: all; a scenario: verl)",
    ),
]
GroupsOpt = Annotated[int, typer.Option("--groups", min=1, help="groups in a corpus")]
LogIntervalOpt = Annotated[
    int, typer.Option("--log-interval", min=1, help="log every k steps (a single scenario)")
]
SynthPrecisionOpt = Annotated[
    SynthPrecision | None,
    typer.Option("--precision", help="the run's numeric precision"),
]

# watch
IntervalOpt = Annotated[float, typer.Option("--interval", help="seconds between polls")]
UntilDoneOpt = Annotated[
    bool,
    typer.Option(
        "--until-done",
        help="stop when every run has finished or is idle for --idle-timeout, then print "
        "the final diagnoses",
    ),
]
IdleTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--idle-timeout", help="seconds without new data, counted from a source's first data"
    ),
]
StartTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--start-timeout",
        help="with --until-done: seconds to wait for a source's first data (or an "
        "experiment's first running run); then exit 2 naming it",
    ),
]
OnAlertOpt = Annotated[
    str | None,
    typer.Option(
        "--on-alert",
        help="command run per alert, the alert in PROXYDIAG_* variables and as JSON on stdin "
        "(no shell)",
    ),
]
NotifyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--notify",
        metavar="URL",
        help="POST each alert's JSON, with a one-line `text` chat webhooks show, to URL "
        "(repeatable)",
    ),
]
NotifyMinOpt = Annotated[Tier, typer.Option("--notify-min", help="the lowest tier sent")]
NotifyCooldownOpt = Annotated[
    float,
    typer.Option(
        "--notify-cooldown", help="seconds between two notifications of one run and class"
    ),
]
NotifyMaxOpt = Annotated[int, typer.Option("--notify-max", help="notifications per run at most")]
ReplayOpt = Annotated[bool, typer.Option("--replay", help="feed finished runs as if live")]
CheckpointsOpt = Annotated[
    str | None,
    typer.Option(
        "--checkpoints",
        help="checkpoint steps 100,200,... or a folder of checkpoint-N / iter_N / global_stepN",
    ),
]
MarginOpt = Annotated[
    int, typer.Option("--margin-steps", help="go back at least this many steps before the onset")
]
PrecisionOpt = Annotated[
    Precision | None,
    typer.Option("--precision", case_sensitive=False, help="the run's numeric precision"),
]

# lab
LabFaultOpt = Annotated[LabFault, typer.Option("--fault", help="the fault injected")]
LabFaultsOpt = Annotated[
    str | None,
    typer.Option("--faults", help="comma-separated faults (default: all kinds)"),
]
FaultStepOpt = Annotated[int, typer.Option("--fault-step", help="step the fault starts")]
ExpertsKeptOpt = Annotated[
    int,
    typer.Option("--experts-kept", min=1, max=8, help="experts kept per layer (8 = full model)"),
]
FullSeedsOpt = Annotated[
    int, typer.Option("--full-seeds", min=1, help="full-model seeds per fault (0, 1, ...)")
]
ProxiesOpt = Annotated[
    bool,
    typer.Option(
        "--proxies/--no-proxies", help="train the proxies keeping 4, 2, 1 experts as well"
    ),
]
LabReplayOpt = Annotated[
    bool,
    typer.Option(
        "--routing-replay",
        help="a bf16 rollout engine whose routing the learner replays (R3), the whole run",
    ),
]
LabPrecisionOpt = Annotated[
    LabPrecision, typer.Option("--precision", help="the run's numeric precision")
]

# proxy build
KeepOpt = Annotated[
    float | None,
    typer.Option("--keep", help="fraction of each layer's routed experts kept, e.g. 0.25"),
]
ExpertsOpt = Annotated[
    int | None,
    typer.Option("--experts", help="routed experts kept per layer (instead of --keep)"),
]
MethodOpt = Annotated[PruneMethod, typer.Option("--method", help="how the experts are picked")]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="text (one sample per line) or JSONL with 'text'; run through the model on CPU",
    ),
]
MaxTokensOpt = Annotated[
    int, typer.Option("--max-tokens", min=1, help="calibration tokens read at most")
]
OffloadDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--offload-dir",
        help="calibrate one decoder layer at a time from disk, using DIR for converted weights "
        "(RAM ~ one layer)",
    ),
]


# --- option groups -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Fleet:
    """Where a command's work items run: ``--workers N`` local processes (1: in this process),
    or ``--ray`` tasks on a local Ray or, with ``--ray-address auto``, on the cluster this
    node belongs to. Results and stdout are the same whichever runs them."""

    workers: Annotated[int, _workers()] = 1
    ray: Annotated[
        bool, typer.Option("--ray", help="run the work items as Ray tasks (needs proxydiag[ray])")
    ] = False
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="Ray cluster to join with --ray: 'auto', or ray://HOST:PORT "
            "(default: start a local Ray)",
        ),
    ] = None

    def executor(self) -> Executor:
        """The executor the flags ask for (a bad combination is a one-line usage error)."""
        from proxydiag.fleet import make_executor

        return make_executor(workers=self.workers, ray=self.ray, ray_address=self.ray_address)


@dataclass(frozen=True, kw_only=True)
class Destination:
    """Where results go: the store and/or MLflow (``--store``, ``--log-to-mlflow``,
    ``--mlflow-experiment``, ``--tracking-uri``)."""

    store: MaybeStoreOpt = None
    mlflow: LogToMlflowOpt = False
    experiment: MlflowExperimentOpt = None
    tracking_uri: TrackingOpt = None
