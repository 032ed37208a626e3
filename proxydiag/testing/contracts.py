"""The common checks every plug-in passes: one function per extension point.

``tests/testing/test_contracts.py`` runs them on every registered reader, console dialect, detector,
fidelity test, aligner and synth writer; call them on a plug-in of your own in your tests.
A failed check raises :class:`ContractError` naming the plug-in and the broken rule.

>>> from proxydiag.diagnose.api import DETECTORS
>>> check_detector(DETECTORS["spikes"], name="spikes")
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from proxydiag.align.axis import Axis
from proxydiag.align.contract import Aligner
from proxydiag.align.grid import build_grid
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.contract import Detector
from proxydiag.diagnose.view import Reads, view
from proxydiag.events import Event
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.context import metric_context
from proxydiag.fidelity.contract import FidelityTest
from proxydiag.fidelity.result import TestResult
from proxydiag.ingest import ReadContext, read_run
from proxydiag.ingest.console.dialects import Chunk, Dialect, Extract
from proxydiag.ingest.contract import Reader
from proxydiag.run import Run
from proxydiag.synth import simulate
from proxydiag.synth.naming import NAMINGS, can_show
from proxydiag.synth.writers import Writer, write_run

__all__ = [
    "ContractError",
    "check_aligner",
    "check_detector",
    "check_dialect",
    "check_fidelity_test",
    "check_reader",
    "check_writer",
]

_SEVERITIES = ("info", "warning", "critical")


class ContractError(AssertionError):
    """A plug-in broke its extension point's contract."""


def _require(ok: bool, who: str, rule: str) -> None:
    if not ok:
        raise ContractError(f"{who}: {rule}")


def check_reader(
    reader: Reader, *, name: str | None = None, sample: Path | None = None
) -> list[Run]:
    """A reader says no, cheaply and without raising, to what is not its format; with a
    ``sample`` of its format it says yes and reads valid runs (returned)."""
    who = f"reader {name or getattr(reader, 'NAME', reader)!r}"
    _require(isinstance(reader, Reader), who, "needs NAME, can_read(source), read(source, ctx)")
    _require(name is None or name == reader.NAME, who, f"NAME {reader.NAME!r} != {name!r}")
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp, "empty")
        empty.mkdir()
        garbage = Path(tmp, "garbage.bin")
        garbage.write_bytes(bytes(range(256)) * 16)
        for probe in (Path(tmp, "missing"), empty, garbage):
            _require(reader.can_read(probe) is False, who, f"can_read({probe.name}) must be False")
    if sample is None:
        return []
    _require(reader.can_read(sample) is True, who, f"can_read({sample}) must be True")
    runs = reader.read(sample, ReadContext())
    _require(bool(runs), who, f"read({sample}) found no run")
    for run in runs:
        _require(isinstance(run, Run), who, "read() must return Runs")
        run.validate()
        _require(run.frame.height > 0, who, f"run {run.name!r} has no points")
    return runs


def check_dialect(dialect: Dialect, *, name: str | None = None) -> None:
    """A console dialect has a name and a sniffing pattern, and extracts nothing (without
    raising) from lines that are not its own."""
    who = f"console dialect {name or getattr(dialect, 'NAME', dialect)!r}"
    _require(isinstance(dialect, Dialect), who, "needs NAME, SNIFF, extract(chunk)")
    _require(name is None or name == dialect.NAME, who, f"NAME {dialect.NAME!r} != {name!r}")
    lines = pl.DataFrame(
        {"line": pl.Series([1, 2], dtype=pl.Int64), "text": ["hello world", "nothing to see here"]}
    )
    text = "\n".join(lines["text"].to_list())
    _require(dialect.SNIFF.search(text) is None, who, "SNIFF matched lines of no framework")
    got = dialect.extract(Chunk(path=Path("contract.log"), lines=lines))
    _require(isinstance(got, Extract), who, "extract() must return an Extract")


def check_detector(detector: Detector, *, name: str | None = None) -> None:
    """A detector declares what it reads and whether it decides, returns well-formed events on
    a healthy run (none critical), nothing for a run without its metrics, and does not raise on
    a run whose values are all NaN or ±inf."""
    who = f"detector {name or detector!r}"
    _require(
        isinstance(detector, Detector), who, "needs NAME, DECIDES, reads(cfg), detect(run, cfg)"
    )
    _require(name is None or name == detector.NAME, who, f"NAME {detector.NAME!r} != {name!r}")
    cfg = DiagnoseConfig()
    _require(isinstance(detector.DECIDES, bool), who, "DECIDES must be True or False")
    declared = tuple(detector.reads(cfg))
    _require(
        bool(declared) and all(isinstance(m, str) and m.strip("*") for m in declared),
        who,
        "reads(cfg) must name the canonical metrics it reads ('prefix*' for a prefix)",
    )
    reads = Reads.of(declared)
    healthy = simulate("healthy", seed=0).run
    rv = view(healthy, reads)
    for event in detector.detect(rv, cfg):
        _check_event(event, who, healthy.first_step, healthy.last_step)
        _require(event.severity != "critical", who, f"a critical {event.kind!r} on a healthy run")
    steps = np.arange(50, dtype=np.int64)
    unrelated = _run({"unrelated_metric": np.ones(50)}, steps)
    _require(detector.detect(view(unrelated, reads), cfg) == [], who, "events without its metrics")
    bad = np.where(steps % 2 == 0, np.nan, np.inf)
    broken = _run({m: bad for m in ("loss", "grad_norm", "loss_scale", "reward")}, steps)
    for event in detector.detect(view(broken, reads), cfg):
        _check_event(event, who, 0, 49)


def check_fidelity_test(test: FidelityTest, *, name: str | None = None) -> None:
    """A fidelity test gives a score in [0, 1] with an ordered interval, and a proxy that is a
    copy of the full run scores at least as well as one whose every value is doubled."""
    who = f"fidelity test {name or getattr(test, 'NAME', test)!r}"
    _require(isinstance(test, FidelityTest), who, "needs NAME, score(full_runs, proxy, grid, ctx)")
    _require(name is None or name == test.NAME, who, f"NAME {test.NAME!r} != {name!r}")
    full = simulate("healthy", seed=0).run
    same = _renamed(full, "copy", 1.0)
    doubled = _renamed(full, "doubled", 2.0)
    scores = []
    for proxy in (same, doubled):
        grid = build_grid([full], proxy, buckets=FidelityConfig().buckets)
        mg = (
            grid.metrics["reward"]
            if "reward" in grid.metrics
            else next(iter(grid.metrics.values()))
        )
        ctx = metric_context(mg, config=FidelityConfig(), rng=np.random.default_rng(0))
        result = test.score([full], proxy, mg, ctx=ctx)
        _require(isinstance(result, TestResult), who, "score() must return a TestResult")
        _require(0.0 <= result.score <= 1.0, who, f"score {result.score} outside [0, 1]")
        if result.ci is not None:  # a test without a bootstrap has no interval
            lo, hi = result.ci
            _require(math.isnan(lo) or lo <= hi, who, f"interval {result.ci} is not ordered")
        scores.append(result.score)
    _require(scores[0] >= scores[1], who, f"a copy scored {scores[0]} < doubled {scores[1]}")


def check_aligner(aligner: Aligner, *, name: str | None = None) -> None:
    """An aligner maps a run's steps monotonically onto its axis."""
    who = f"aligner {name or getattr(aligner, 'NAME', aligner)!r}"
    _require(isinstance(aligner, Aligner), who, "needs NAME, RANGE, axis(run)")
    _require(name is None or name == aligner.NAME, who, f"NAME {aligner.NAME!r} != {name!r}")
    _require(aligner.RANGE in ("overlap", "progress"), who, f"RANGE {aligner.RANGE!r}")
    run = simulate("healthy", seed=0).run
    axis = aligner.axis(run)
    _require(isinstance(axis, Axis), who, "axis() must return an Axis")
    steps = np.unique(run.frame["step"].to_numpy())
    positions = axis(steps)
    _require(bool(np.all(np.diff(positions) >= 0)), who, "axis positions must not decrease")


def check_writer(writer: Writer, *, fmt: str) -> Run:
    """A synth writer's output is read back by proxydiag at the steps it wrote, with the values
    it wrote (to the precision the format prints), NaN and ±inf included; returns the run
    read."""
    who = f"writer {fmt!r}"
    naming = next(n for n, spec in NAMINGS.items() if fmt in spec.formats)
    # a divergence ends in NaN grad norms (non-finite values round-trip); formats that only
    # show an fp16 scaler (DeepSpeed-Chat logs) get a scaler collapse
    sr = next(
        sr
        for sr in (simulate(v, seed=0) for v in ("divergence", "fp16_scaler_collapse"))
        if can_show(
            naming,
            fmt,
            variant=sr.truth.variant,
            precision=sr.scenario.precision,
            routing=sr.scenario.routing,
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        target = write_run(Path(tmp), sr, fmt=fmt, naming=naming, log_interval=1)
        got = read_run(target)
    shared = sorted(set(got.metrics) & set(sr.run.metrics))
    _require(bool(shared), who, "no metric read back under its canonical name")
    for metric in shared:
        steps, values = got.series(metric)
        ref_steps, ref_values = sr.run.series(metric)
        index = np.minimum(np.searchsorted(ref_steps, steps), ref_steps.size - 1)
        _require(
            bool(np.array_equal(ref_steps[index], steps)),
            who,
            f"{metric}: read at steps {_steps_off(steps, ref_steps)} that were not written",
        )
        ref = ref_values[index]
        same = np.isclose(values, ref, rtol=5e-3, equal_nan=True) | (values == ref)
        _require(bool(same.all()), who, f"{metric}: values differ from what was written")
    return got


def _steps_off(steps: np.ndarray, written: np.ndarray) -> str:
    off = np.setdiff1d(steps, written)
    return ", ".join(str(int(s)) for s in off[:5]) + (" ..." if off.size > 5 else "")


def _check_event(event: Any, who: str, first: int, last: int) -> None:
    _require(isinstance(event, Event), who, "detect() must return Events")
    _require(event.severity in _SEVERITIES, who, f"severity {event.severity!r}")
    _require(0.0 <= event.confidence <= 1.0, who, f"confidence {event.confidence}")
    if event.onset_step is not None:
        _require(
            first <= event.onset_step <= last,
            who,
            f"{event.kind} onset {event.onset_step} outside the run [{first}, {last}]",
        )


def _run(metrics: dict[str, np.ndarray], steps: np.ndarray) -> Run:
    raw = pl.DataFrame(
        {
            "step": np.tile(steps, len(metrics)),
            "key": np.repeat(list(metrics), steps.size),
            "value": np.concatenate(list(metrics.values())),
        }
    )
    return Run.from_raw(raw, name="contract", source="contract", fmt="contract")


def _renamed(run: Run, name: str, factor: float) -> Run:
    frame = run.frame.with_columns(pl.col("value") * factor, pl.lit(name).alias("run"))
    return dataclasses.replace(
        run, frame=frame, name=name, attrs={**run.attrs, "source": name, "run_id": name}
    )
