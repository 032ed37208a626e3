"""``proxydiag report`` end to end on files (analyses replaced by hand-built results)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _report_data import make_comparison, make_diagnosis, make_run

from proxydiag.cli import main
from proxydiag.report import api
from proxydiag.run import Run


def _write(run: Run, folder: Path, **sidecar: Any) -> str:
    folder.mkdir(parents=True)
    run.wide().write_csv(folder / "metrics.csv")
    (folder / "proxydiag.json").write_text(json.dumps(sidecar))
    return str(folder / "metrics.csv")


@pytest.fixture
def fake_analyses(monkeypatch: pytest.MonkeyPatch) -> None:
    """diagnose: divergence at 60% of the run unless the run's name says healthy."""

    def diagnose(run: Run, **_: Any) -> Any:
        return make_diagnosis(
            run, onset=None if "healthy" in str(run.attrs["source"]) else int(run.last_step * 0.6)
        )

    def compare(full: list[Run], proxy: Run, **_: Any) -> Any:
        return make_comparison(full, proxy)

    found = {"diagnose": diagnose, "compare": compare}
    monkeypatch.setattr(api, "analyses", lambda: (found["diagnose"], found["compare"]))


def _run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)


def test_comparison_report_and_fail_on(
    tmp_path: Path, fake_analyses: None, capsys: pytest.CaptureFixture[str]
) -> None:
    full = [
        _write(
            make_run(f"f{i}", seed=i, n_steps=300, onset=180),
            tmp_path / f"f{i}",
            role="full",
            group="g",
            seed=i,
        )
        for i in range(2)
    ]
    proxy = _write(
        make_run("p", seed=9, n_steps=300, onset=190, role="proxy"),
        tmp_path / "p",
        role="proxy",
        group="g",
        experts_kept=0.25,
    )
    out = tmp_path / "out" / "report.html"
    argv = ["report", "--full", full[0], "--full", full[1], "--proxy", proxy, "-o", str(out)]
    assert _run_cli(argv) == 0
    html = out.read_text()
    assert "is partial to metrics (+1 seed) (fidelity 0.72)" in html
    assert "metrics: loss_divergence from step 179" in html
    assert capsys.readouterr().out.strip() == str(out)
    assert _run_cli([*argv, "--fail-on", "precision_fault,unfaithful"]) == 0
    capsys.readouterr()
    assert _run_cli([*argv, "--fail-on", "loss_divergence"]) == 1
    assert "--fail-on matched: metrics: loss_divergence" in capsys.readouterr().out
    assert _run_cli([*argv, "--fail-on", "partial", "-f", "markdown", "-o", "-"]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("### proxydiag report\n") and "| reward | 0.910 |" in printed


def test_diagnosis_report_json(tmp_path: Path, fake_analyses: None) -> None:
    src = _write(make_run("h", seed=1, n_steps=200), tmp_path / "healthy", role="full")
    out = tmp_path / "r.json"
    assert (
        _run_cli(["report", src, "-f", "json", "-o", str(out), "--fail-on", "loss_divergence"]) == 0
    )
    doc = json.loads(out.read_text())
    assert [d["label"] for d in doc["diagnoses"]] == ["healthy"] and doc["comparison"] is None


def test_usage_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_cli(["report", "-o", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("error: give SOURCE..., or --full SOURCE... --proxy SOURCE")
        and "\n" not in err
    )
    assert _run_cli(["report", "x", "-f", "pdf"]) == 2
    assert "'pdf' is not one of 'html', 'markdown', 'json'" in capsys.readouterr().err


def test_log_to_mlflow_writes_results_and_the_html_report(
    tmp_path: Path, fake_analyses: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real MLflow tracking store (sqlite, no server): tags, metric and report.html artifact."""
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root ./mlruns lands in tmp
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    full = _write(make_run("f", seed=0, n_steps=200, onset=120), tmp_path / "f", role="full")
    proxy = _write(make_run("p", seed=1, n_steps=200, onset=120), tmp_path / "p", role="proxy")
    argv = [
        "report",
        "--full",
        full,
        "--proxy",
        proxy,
        "-f",
        "markdown",
        "-o",
        str(tmp_path / "r.md"),
        "--log-to-mlflow",
        "--mlflow-experiment",
        "reports",
        "--tracking-uri",
        uri,
    ]
    assert _run_cli(argv) == 0
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("reports")
    runs = {
        r.data.tags["proxydiag.source"]: r for r in client.search_runs([experiment.experiment_id])
    }
    assert set(runs) == {full, proxy}
    logged = runs[proxy]
    assert logged.data.tags["proxydiag.label"] == "loss_divergence"
    assert logged.data.tags["proxydiag.verdict"] == "partial"
    assert logged.data.metrics["proxydiag.fidelity"] == pytest.approx(0.72)
    html = Path(
        client.download_artifacts(logged.info.run_id, "proxydiag/report.html", str(tmp_path / "dl"))
    ).read_text()
    assert html.startswith("<!DOCTYPE html>") and "is partial to metrics (fidelity 0.72)" in html


def test_group_from_store_writes_one_report_per_proxy_inside_the_folder(
    tmp_path: Path, fake_analyses: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxydiag.store import RunStore

    store = RunStore(tmp_path / "store")
    store.put(make_run("full", seed=0, n_steps=200, onset=120))
    for name in ("../../evil", "p25"):
        store.put(make_run(name, seed=1, n_steps=200, onset=125, role="proxy"))
    out = tmp_path / "out" / "report.html"
    argv = ["report", "--store", str(tmp_path / "store"), "--group", "g1", "-o", str(out)]
    assert _run_cli(argv) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["report-evil.html", "report-p25.html"]
    assert list(tmp_path.glob("*.html")) == []
    assert "../../evil is partial" in (out.parent / "report-evil.html").read_text()
    assert _run_cli([*argv[:4], "nope", "-o", str(out)]) == 2
    assert "no runs in group 'nope'; groups: g1" in capsys.readouterr().err


def test_group_diagnoses_each_run_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from proxydiag.store import RunStore

    store = RunStore(tmp_path / "store")
    store.put(make_run("full", seed=0, n_steps=200, onset=120))
    for name in ("p1", "p2", "p3"):
        store.put(make_run(name, seed=1, n_steps=200, onset=125, role="proxy"))
    diagnosed: list[str] = []

    def diagnose(run: Run, **_: Any) -> Any:
        diagnosed.append(run.name)
        return make_diagnosis(run, onset=int(run.last_step * 0.6))

    found = {"diagnose": diagnose, "compare": lambda full, proxy, **_: make_comparison(full, proxy)}
    monkeypatch.setattr(api, "analyses", lambda: (found["diagnose"], found["compare"]))
    argv = [
        "report",
        "--store",
        str(tmp_path / "store"),
        "--group",
        "g1",
        "-o",
        str(tmp_path / "out" / "report.html"),
    ]
    assert _run_cli(argv) == 0
    assert sorted(diagnosed) == ["full", "p1", "p2", "p3"]  # the full run once, not per proxy


def test_fail_on_rejects_unknown_classes(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_cli(["report", "x", "--fail-on", "loss_divergance"]) == 2
    assert (
        "--fail-on 'loss_divergance': unknown class loss_divergance; use one or more of "
        "healthy, gradient_overflow" in capsys.readouterr().err
    )


def test_fail_on_line_goes_to_stderr_when_the_document_is_on_stdout(
    tmp_path: Path, fake_analyses: None, capsys: pytest.CaptureFixture[str]
) -> None:
    full = _write(make_run("f", seed=0, n_steps=200, onset=120), tmp_path / "f", role="full")
    proxy = _write(make_run("p", seed=1, n_steps=200, onset=125), tmp_path / "p", role="proxy")
    argv = [
        "report",
        "--full",
        full,
        "--proxy",
        proxy,
        "-f",
        "markdown",
        "-o",
        "-",
        "--fail-on",
        "partial",
    ]
    assert _run_cli(argv) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("### proxydiag report\n") and "--fail-on" not in captured.out
    assert captured.err == "--fail-on matched: metrics: partial\n"


def test_proxy_folder_of_several_runs_fails_before_reading_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxydiag.ingest.tabular import csv

    group = tmp_path / "group"
    for name in ("f0", "p1", "p2"):
        _write(make_run(name, seed=1, n_steps=50), group / name)

    def read(source: Any, ctx: Any) -> Any:
        raise AssertionError(f"read {source}")

    monkeypatch.setattr(csv, "read", read)
    assert (
        _run_cli(
            [
                "report",
                "--full",
                str(group / "f0"),
                "--proxy",
                str(group),
                "-o",
                str(tmp_path / "r.html"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == (
        f"error: {group}: holds 3 runs (f0/metrics.csv, p1/metrics.csv, p2/metrics.csv); "
        "name one of them (read_runs() reads them all)\n"
    )
