"""Every metric the diagnosis reads is declared by a detector or the taxonomy.

The run view holds only the declared metrics (offline and in the watcher's memory), so a read
that is not declared would silently see nothing. Here the view holds *every* metric of the run
and records what is asked of it, on runs of every failure class and several namings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proxydiag.diagnose import api, taxonomy
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.view import Reads, RunView, view
from proxydiag.ingest import read_runs
from proxydiag.synth.scenario import SCENARIOS, named
from proxydiag.synth.single import write_single

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"


class _Recording(RunView):
    asked: set[str]

    def get(self, metric: str):  # type: ignore[no-untyped-def]
        self.asked.add(metric)
        return super().get(metric)


def _recording(everything: RunView) -> _Recording:
    rv = _Recording(
        everything.series,
        everything.first_step,
        everything.last_step,
        everything.mapping,
        everything.precision,
    )
    object.__setattr__(rv, "asked", set())
    return rv


def _undeclared(run, cfg: DiagnoseConfig) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """Per detector (and the taxonomy): the run's metrics it read without declaring them."""
    everything = view(run, Reads(frozenset(), ("",)))  # every metric of the run
    found: dict[str, list[str]] = {}
    events = []
    for name in api.DETECTORS.names():
        detector = api.DETECTORS[name]
        rv = _recording(everything)
        events += detector.detect(rv, cfg)
        declared = Reads.of(detector.reads(cfg))
        found[name] = sorted(m for m in rv.asked if m not in declared and m in everything.series)
    rv = _recording(everything)
    api.classify(events, rv, cfg)
    declared = Reads.of(taxonomy.reads(cfg))
    found["taxonomy"] = sorted(m for m in rv.asked if m not in declared and m in everything.series)
    return {who: metrics for who, metrics in found.items() if metrics}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("naming", ["verl", "trl", "megatron"])
def test_what_is_read_is_declared(scenario: str, naming: str, tmp_path: Path) -> None:
    cfg = DiagnoseConfig()
    try:
        path = write_single(
            tmp_path, named(scenario, n_steps=300), seed=3, fmt="jsonl", naming=naming
        )
    except Exception as exc:  # a scenario a naming cannot show (e.g. no loss scale)
        pytest.skip(f"{scenario} in {naming}: {exc}")
    runs = [r for p in sorted(path.parent.rglob("*.jsonl")) for r in read_runs(p)]
    assert runs
    for run in runs:
        assert _undeclared(run, cfg) == {}, run.name


def test_a_configured_metric_is_read_offline_and_live() -> None:
    """A metric added to a detector's settings is in the view: a declaration follows the
    configuration, not a hand-written list."""
    from dataclasses import replace

    cfg = DiagnoseConfig()
    cfg = replace(cfg, spikes=replace(cfg.spikes, metrics=(*cfg.spikes.metrics, "kl")))
    assert "kl" in api.metrics_read(cfg)
    assert "throughput_tokens" not in api.metrics_read(cfg)


def test_every_detector_declares_reads_and_whether_it_decides() -> None:
    cfg = DiagnoseConfig()
    for detector in api.DETECTORS:
        assert isinstance(detector.DECIDES, bool)
        assert all(isinstance(m, str) and m for m in detector.reads(cfg))
    assert not api.DETECTORS["drift"].DECIDES


def test_what_is_read_on_the_sample_runs_is_declared() -> None:
    from proxydiag.ingest import discover

    cfg = DiagnoseConfig()
    found = discover(SAMPLES)
    assert len(found) >= 5
    for _reader, source in found[::2]:  # every other source: the shapes, at half the cost
        for run in read_runs(source):
            assert _undeclared(run, cfg) == {}, run.name


@pytest.mark.parametrize("fault", ["", "rise", "nonfinite", "all"])
def test_what_is_read_of_per_layer_router_metrics_is_declared(fault: str, tmp_path: Path) -> None:
    from tests._moe_layers import Moe, series, write

    moe = Moe(fault=fault, metric="z_loss" if fault == "nonfinite" else "load_balancing_loss")
    run = read_runs(write(tmp_path / "run.jsonl", series(moe, 11), "jsonl"))[0]
    assert any("_layer_" in m for m in run.metrics)
    assert _undeclared(run, DiagnoseConfig()) == {}
