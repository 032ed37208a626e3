"""``sample_runs/`` is what the generator writes: regenerating reproduces the same canonical
frames (file names may differ); plus the ``proxydiag synth`` and ``proxydiag demo`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from proxydiag import read_runs
from proxydiag.cli import main
from proxydiag.run import Run
from proxydiag.synth import write_corpus, write_sample_runs
from tests._paths import SAMPLES

EXEMPT = {"lab"}  # real lab runs: torch on CPU is not bit-stable across machines


def _generated(root: Path) -> dict[str, Run]:
    runs: dict[str, Run] = {}
    for child in sorted(root.iterdir()):
        if child.is_dir() and child.name not in EXEMPT:
            runs.update({r.name: r for r in read_runs(child)})
    return runs


def _frame(run: Run) -> pl.DataFrame:
    return run.frame.drop("run").sort("metric", "key", "step")


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("samples")
    write_sample_runs(out)
    return out


def test_regenerating_reproduces_the_checked_in_sample_runs(regenerated: Path) -> None:
    if not (SAMPLES / "labels.json").exists():
        pytest.skip("sample_runs/ is not generated in this checkout")
    checked_in, fresh = _generated(SAMPLES), _generated(regenerated)
    assert sorted(checked_in) == sorted(fresh)
    for name, run in checked_in.items():
        assert_frame_equal(_frame(run), _frame(fresh[name]), check_exact=True)
        for attr in ("role", "group", "seed", "experts_kept", "cost_per_step", "precision"):
            assert run.attrs.get(attr) == fresh[name].attrs.get(attr), (name, attr)
    labels = json.loads((SAMPLES / "labels.json").read_text())
    assert labels == json.loads((regenerated / "labels.json").read_text())


def test_sample_runs_cover_every_class_with_seeds_and_three_proxies(regenerated: Path) -> None:
    labels = json.loads((regenerated / "labels.json").read_text())["runs"]
    assert {r["label"] for r in labels.values()} == {
        "healthy",
        "gradient_overflow",
        "loss_divergence",
        "precision_fault",
    }
    groups: dict[str, list[dict[str, object]]] = {}
    for r in labels.values():
        groups.setdefault(str(r["group"]), []).append(r)
    for runs in groups.values():
        assert sorted(r["seed"] for r in runs if r["role"] == "full") == [0, 1, 2]
        assert sorted(r["experts_kept"] for r in runs if r["role"] == "proxy") == [8, 16, 32]
    size = sum(p.stat().st_size for p in regenerated.rglob("*") if p.is_file())
    assert size < 8_000_000
    assert "## `precision-climb-divergence/`" in (regenerated / "README.md").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["synth", "-s", "meltdown", "-o", "x"], "unknown scenario 'meltdown'"),
        (
            ["synth", "-s", "sync_step", "-f", "megatron", "-n", "megatron", "-o", "x"],
            "cannot show sync_step",
        ),
        (["synth", "-f", "parquet", "-o", "x"], "'parquet' is not one of"),
    ],
)
def test_synth_cli_refuses_bad_values_with_one_line(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_synth_cli_writes_one_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "synth",
                "-s",
                "divergence",
                "-f",
                "csv",
                "-n",
                "trl",
                "--steps",
                "200",
                "--log-interval",
                "5",
                "-o",
                str(tmp_path),
            ]
        )
    assert exc.value.code == 0
    labels = json.loads((tmp_path / "labels.json").read_text())
    assert labels["runs"]["divergence"]["onset_step"] == 80
    (run,) = read_runs(tmp_path / "divergence")
    assert run.last_step == 200 and run.has("grad_norm")


def test_demo_runs_the_pipeline_on_a_small_corpus(tmp_path: Path) -> None:
    from proxydiag.cli.demo_pipeline import run_demo

    write_corpus(tmp_path / "samples", n_groups=1, seed=2, steps=150)
    result = run_demo(
        samples=tmp_path / "samples", store_path=tmp_path / "store", out_dir=tmp_path / "out"
    )
    assert len(result.runs) == 6
    missing = set(result.unavailable)
    if "diagnose" not in missing:
        assert len(result.diagnoses) == 6
    if "compare" not in missing and "diagnose" not in missing:
        assert len(result.comparisons) == 3
        assert all(0.0 <= c.fidelity <= 1.0 for c in result.comparisons)
    if "report" not in missing:
        assert result.report is not None and result.report.stat().st_size > 100_000
    from proxydiag.store import RunStore

    assert RunStore(tmp_path / "store").runs().height == 6
