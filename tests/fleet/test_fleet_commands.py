"""The fleet commands over local workers: ``--workers 2`` gives ``--workers 1``'s store and
output, a bad source is one line, and a re-run skips what is unchanged unless ``--force``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from fleet_helpers import ROOT, run_cli, sample_group, store_state

from proxydiag.store import RunStore

RUN_SCHEMA = json.loads((ROOT / "proxydiag" / "schemas" / "run.schema.json").read_text())
DIAGNOSIS_SCHEMA = json.loads(
    (ROOT / "proxydiag" / "schemas" / "diagnosis.schema.json").read_text()
)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One sample group ingested, diagnosed and compared with 1 and with 2 workers."""
    tmp = tmp_path_factory.mktemp("fleet")
    group = sample_group(tmp)
    capsys = _Capture()
    found: dict[str, object] = {"group": group}
    for workers in ("1", "2"):
        store = str(tmp / f"store-{workers}")
        flags = ["--store", store, "--workers", workers]
        found[workers] = {
            "ingest": capsys.cli(["ingest", str(group), *flags]),
            "runs": capsys.cli(["runs", "--store", store, "--format", "json"]),
            "diagnose": capsys.cli(["diagnose", "--all", "-f", "json", *flags]),
            "compare": capsys.cli(["compare", *flags]),
            "store": store,
        }
    return found


class _Capture:
    """``run_cli`` for a module-scoped fixture (which cannot use the capsys fixture)."""

    def cli(self, args: list[str]) -> tuple[int, str, str]:
        import contextlib
        import io

        from proxydiag.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            with pytest.raises(SystemExit) as exc:
                main(args)
        return int(exc.value.code or 0), out.getvalue(), err.getvalue()


def test_two_workers_give_one_workers_store_and_output(stores: dict[str, object]) -> None:
    one, two = stores["1"], stores["2"]
    assert isinstance(one, dict) and isinstance(two, dict)
    for command in ("ingest", "runs", "diagnose", "compare"):
        assert one[command][0] == 0, one[command]
        said = one[command][1].replace(one["store"], two["store"])
        assert (one[command][0], said) == two[command][:2], command
    assert store_state(Path(one["store"])) == store_state(Path(two["store"]))


def test_runs_diagnoses_and_comparisons_are_json_lines(stores: dict[str, object]) -> None:
    one = stores["1"]
    assert isinstance(one, dict)
    runs = [json.loads(line) for line in one["runs"][1].splitlines()]
    for run in runs:
        jsonschema.validate(run, RUN_SCHEMA, cls=jsonschema.Draft202012Validator)
    assert [r["id"] for r in runs] == sorted(r["id"] for r in runs) and len(runs) == 4
    assert {r["role"] for r in runs} == {"full", "proxy"} and {r["group"] for r in runs} == {
        "healthy"
    }
    diagnoses = [json.loads(line) for line in one["diagnose"][1].splitlines()]
    assert [d["run"] for d in diagnoses] == [r["id"] for r in runs]
    for d in diagnoses:
        jsonschema.validate(d, DIAGNOSIS_SCHEMA, cls=jsonschema.Draft202012Validator)
    comparisons = [json.loads(line) for line in one["compare"][1].splitlines()]
    proxies = [r["id"] for r in runs if r["role"] == "proxy"]
    assert [c["proxy_run"] for c in comparisons] == proxies
    assert all(len(c["full_runs"]) == 2 for c in comparisons)
    assert RunStore(one["store"]).comparisons().height == 2


def test_a_rerun_reuses_unchanged_results_and_force_recomputes(
    stores: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    one = stores["1"]
    assert isinstance(one, dict)
    store = RunStore(one["store"])
    before = _created(store)
    again = run_cli(["diagnose", "--all", "-f", "json", "--store", one["store"]], capsys)
    assert again[:2] == one["diagnose"][:2] and _created(store) == before
    forced = run_cli(
        ["diagnose", "--all", "-f", "json", "--store", one["store"], "--force"], capsys
    )
    assert forced[:2] == one["diagnose"][:2]
    assert all(_created(store)[run] > at for run, at in before.items())


def _created(store: RunStore) -> dict[str, object]:
    import duckdb

    with duckdb.connect(str(store.db), read_only=True) as con:
        return dict(con.execute("SELECT run, created_at FROM diagnoses").fetchall())


def test_a_fleet_ingest_skips_unchanged_sources_and_rereads_a_changed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = sample_group(tmp_path)
    store = str(tmp_path / "store")
    assert run_cli(["ingest", str(group), "--store", store], capsys)[0] == 0
    code, out, err = run_cli(["ingest", str(group), "--store", store], capsys)
    assert code == 0 and out == "" and "4 source(s) unchanged" in err
    changed = group / "healthy-full-s2" / "metrics.jsonl"
    lines = changed.read_text().splitlines()
    changed.write_text("\n".join(lines[:-1]) + "\n")  # the run lost its last record
    code, out, err = run_cli(["ingest", str(group), "--store", store], capsys)
    assert code == 0 and "3 source(s) unchanged" in err and "1 run(s) stored" in out
    code, out, err = run_cli(["ingest", str(group), "--store", store, "--force"], capsys)
    assert code == 0 and "unchanged" not in err and "4 run(s) stored" in out
    # one source named on its own is read again, as `ingest` always did
    code, out, err = run_cli(["ingest", str(changed), "--store", store], capsys)
    assert code == 0 and "unchanged" not in err and "1 run(s) stored" in out


def test_a_bad_source_is_one_line_and_the_others_are_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = sample_group(tmp_path)
    bad = group / "healthy-proxy-e16" / "metrics.csv"
    bad.write_text("step,loss\n1,0.5\n2,abc\n")
    store = str(tmp_path / "store")
    code, out, err = run_cli(["ingest", str(group), "--store", store, "--workers", "2"], capsys)
    assert code == 2 and "3 run(s) stored" in out
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: {bad}") and "'abc'" in line
