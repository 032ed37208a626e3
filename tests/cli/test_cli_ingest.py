"""`proxydiag ingest` and `proxydiag runs [show|rm]`, in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxydiag.cli import main
from proxydiag.store import RunStore


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    return int(info.value.code or 0)


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "good.csv"
    good.write_text("step,actor/grad_norm,loss\n1,0.5,2.0\n2,nan,1.5\n3,inf,1.25\n")
    other = tmp_path / "verl.jsonl"
    other.write_text(
        '{"step": 1, "data": {"actor/pg_loss": 0.1}}\n'
        '{"step": 2, "data": {"actor/pg_loss": null}}\n'
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("step,loss\n1,0.5\n2,abc\n")
    return {"good": good, "other": other, "bad": bad}


def test_ingest_list_show_rm(
    tmp_path: Path, sources: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "store")
    assert (
        cli(
            "ingest",
            str(sources["good"]),
            str(sources["other"]),
            "--store",
            store,
            "--role",
            "proxy",
            "--group",
            "g7",
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "2 run(s) stored in" in captured.out and captured.err == ""
    runs = RunStore(store).runs()
    assert sorted(runs["name"].to_list()) == ["good", "verl"]
    assert set(runs["role"]) == {"proxy"} and set(runs["group"]) == {"g7"}
    assert cli("ingest", str(sources["good"]), "--store", store) == 0  # idempotent
    assert RunStore(store).runs().height == 2
    capsys.readouterr()

    assert cli("runs", "--store", store) == 0
    listing = capsys.readouterr().out
    assert "2 run(s) in" in listing and "good" in listing and "verl" in listing

    rid = RunStore(store).get("good").id
    assert cli("runs", "show", "good", "--store", store) == 0
    shown = capsys.readouterr().out
    assert f"run {rid}  (good)" in shown
    row = next(line for line in shown.splitlines() if "actor/grad_norm" in line)
    assert row.split("│")[1:7] == [
        " grad_norm       ",
        " actor/grad_norm ",
        "      3 ",
        "          2 ",
        "          1 ",
        "         3 ",
    ] or (
        [c.strip() for c in row.split("│")[1:7]]
        == ["grad_norm", "actor/grad_norm", "3", "2", "1", "3"]
    )

    assert cli("runs", "--store", store, "rm", rid) == 0
    assert capsys.readouterr().out.strip() == f"removed {rid}"
    assert RunStore(store).runs()["name"].to_list() == ["verl"]


def test_a_bad_source_fails_alone(
    tmp_path: Path, sources: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "store")
    code = cli(
        "ingest",
        str(sources["bad"]),
        str(sources["good"]),
        str(tmp_path / "missing.csv"),
        "--store",
        store,
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        f"error: {sources['bad']}:3: 'abc' is not a number in column loss",
        f"error: {tmp_path / 'missing.csv'}: no such file or directory",
    ]
    assert RunStore(store).runs()["name"].to_list() == ["good"]  # the good source was kept


def test_unknown_run_and_empty_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    assert cli("runs", "--store", store) == 0
    assert "no runs in" in capsys.readouterr().out
    assert cli("runs", "show", "nope", "--store", store) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: nope: no such run in store {store}; see `proxydiag runs`"
    )


def test_a_file_still_being_written_then_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The complete rows so far now; the rest on the next ingest; never a duplicate run."""
    store = str(tmp_path / "store")
    live = tmp_path / "live.jsonl"
    live.write_text('{"step": 1, "loss": 1.5}\n{"step": 2, "loss": 1.25}\n{"step": 3, "lo')
    assert cli("ingest", str(live), "--store", store) == 0
    assert f"warning: {live}:3: the last line is cut" in capsys.readouterr().err
    assert RunStore(store).get("live").frame["value"].to_list() == [1.5, 1.25]
    live.write_text(
        '{"step": 1, "loss": 1.5}\n{"step": 2, "loss": 1.25}\n{"step": 3, "loss": 1.0}\n'
    )
    assert cli("ingest", str(live), "--store", store) == 0
    assert RunStore(store).runs().height == 1
    assert RunStore(store).get("live").frame["value"].to_list() == [1.5, 1.25, 1.0]


def test_hostile_names_are_shown_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Metric keys are user data: rich markup in them is printed, never interpreted."""
    path = tmp_path / "[red]run[x].csv"
    path.write_text('step,"[/b] close",<img src=x onerror=alert(1)>,$(id)\n1,1,2,3\n')
    store = str(tmp_path / "store")
    assert cli("ingest", str(path), "--store", store) == 0
    assert cli("runs", "show", "[red]run[x]", "--store", store) == 0
    shown = capsys.readouterr().out
    for key in (
        "[/b] close",
        "<img src=x onerror=alert(1)>",
        "$(id)",
        "run red_run_x-",
        "([red]run[x])",
    ):
        assert key in shown


def test_runs_table_shows_whole_numbers_as_integers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """experts_kept is stored as a float: 64 must not read as 64.0, 0.25 stays 0.25."""
    for name, kept in (("full", 64), ("proxy", 0.25)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.csv").write_text("step,loss\n1,0.5\n2,0.25\n")
        (folder / "proxydiag.json").write_text(f'{{"experts_kept": {kept}}}')
    store = str(tmp_path / "store")
    assert cli("ingest", str(tmp_path / "full"), str(tmp_path / "proxy"), "--store", store) == 0
    capsys.readouterr()
    assert cli("runs", "--store", store) == 0
    rows = {
        line.split("│")[2].strip(): [c.strip() for c in line.split("│")[5:8]]
        for line in capsys.readouterr().out.splitlines()
        if line.count("│") > 5
    }
    assert rows["full"] == ["64", "csv", "2"] and rows["proxy"] == ["0.25", "csv", "2"]
