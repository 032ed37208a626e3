"""``proxydiag compare``: outputs, schema, exit codes, the store."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest
from _fidelity_runs import curves
from _spies import mlflow_down, recorded

from proxydiag.cli import main
from tests._paths import SCHEMAS

SCHEMA = json.loads((SCHEMAS / "comparison.schema.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    specs = {
        "full": curves(400, seed=0),
        "seed": curves(400, seed=1),
        "flat": curves(400, seed=2, learns=False),
    }
    for name, data in specs.items():
        pl.DataFrame({"step": np.arange(400), **data}).write_csv(out / f"{name}.csv")
    return out


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def test_schema_is_valid_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_json_output_matches_the_schema(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        [
            "compare",
            "--full",
            str(runs / "full.csv"),
            "--proxy",
            str(runs / "seed.csv"),
            "--format",
            "json",
        ],
        capsys,
    )
    data = json.loads(out)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert code == 0 and data["verdict"] == "faithful" and data["align"] == "step"
    assert data["metrics"]["reward"]["tests"]["trend"]["explanation"].startswith(
        "reward trend: Spearman"
    )


def test_text_explains_every_score(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        ["compare", "--full", str(runs / "full.csv"), "--proxy", str(runs / "flat.csv")], capsys
    )
    assert code == 0
    assert out.splitlines()[0].startswith("proxy flat-") and ": unfaithful, fidelity 0." in out
    assert "does not learn: full run's reward changes +" in out
    assert "reward trend: Spearman" in out and "seed-to-seed" in out


@pytest.mark.parametrize(
    ("proxy", "fail_on", "code"),
    [
        ("flat", "unfaithful", 1),
        ("flat", "partial", 1),
        ("seed", "partial", 0),
        ("seed", "unfaithful", 0),
    ],
)
def test_fail_on_exit_codes(
    runs: Path, capsys: pytest.CaptureFixture[str], proxy: str, fail_on: str, code: int
) -> None:
    got, _, _ = run_cli(
        [
            "compare",
            "--full",
            str(runs / "full.csv"),
            "--proxy",
            str(runs / f"{proxy}.csv"),
            "--fail-on",
            fail_on,
            "-f",
            "markdown",
        ],
        capsys,
    )
    assert got == code


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--proxy", "missing.csv"], "missing.csv: no such file"),
        (["--proxy", "SEED", "--align", "tokens"], "--align tokens needs 'tokens' or 'samples'"),
        (["--proxy", "SEED", "--fail-on", "sometimes"], "--fail-on 'sometimes'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    runs: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    extra = [str(runs / "seed.csv") if e == "SEED" else e for e in extra]
    code, _, err = run_cli(["compare", "--full", str(runs / "full.csv"), *extra], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_store_keeps_the_comparison(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxydiag.store import RunStore

    store = tmp_path / "store"
    code, _, _ = run_cli(
        [
            "compare",
            "--full",
            str(runs / "full.csv"),
            "--proxy",
            str(runs / "seed.csv"),
            "--store",
            str(store),
            "-f",
            "json",
        ],
        capsys,
    )
    rows = RunStore(store).comparisons()
    assert code == 0 and rows.height == 1 and rows["verdict"][0] == "faithful"
    assert json.loads(rows["json"][0])["proxy_run"].startswith("seed-")


def test_markdown_escapes_user_strings() -> None:
    from _fidelity_runs import diag, make_run

    from proxydiag.fidelity.api import compare
    from proxydiag.report.comparison import markdown

    key = "<img src=x onerror=alert(1)>|x"
    full = make_run("f", {key: curves(200, seed=0)["reward"]})
    proxy = make_run("p", {key: curves(200, seed=1)["reward"]})
    text = markdown(
        compare([full], proxy, full_diagnoses=[diag(full)], proxy_diagnosis=diag(proxy))
    )
    assert "&lt;img src=x onerror=alert(1)&gt;\\|x" in text and "<img" not in text


def test_log_to_mlflow_stores_the_comparison_once_and_first(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from proxydiag.store import RunStore

    calls = recorded(monkeypatch, RunStore, "put_comparison")
    uri = mlflow_down(monkeypatch)
    store = tmp_path / "store"
    code, _, err = run_cli(
        [
            "compare",
            "--full",
            str(runs / "full.csv"),
            "--proxy",
            str(runs / "seed.csv"),
            "--store",
            str(store),
            "--log-to-mlflow",
            "--tracking-uri",
            uri,
            "-f",
            "json",
        ],
        capsys,
    )
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    stored = [c.proxy_run for _, c in calls]
    assert len(stored) == 1 and stored[0].startswith("seed-")
    rows = RunStore(store).comparisons()
    assert rows["verdict"].to_list() == ["faithful"] and rows["mlflow_synced"].to_list() == [False]


def test_log_to_mlflow_diagnoses_each_run_once(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison and the report logged beside it share one diagnosis per run."""
    from proxydiag.diagnose import api as diagnose_api

    calls = recorded(monkeypatch, diagnose_api, "diagnose")
    monkeypatch.chdir(tmp_path)  # the sqlite store puts artifacts under ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    code, _, err = run_cli(
        [
            "compare",
            "--full",
            str(runs / "full.csv"),
            "--proxy",
            str(runs / "seed.csv"),
            "--log-to-mlflow",
            "--tracking-uri",
            uri,
            "-f",
            "json",
        ],
        capsys,
    )
    assert code == 0, err
    assert sorted(run.name for (run,) in calls) == ["full", "seed"]
