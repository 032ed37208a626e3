"""``proxydiag.cli.sources`` and ``read_run``: what a SOURCE names, and fast refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxydiag.cli.sources import load, load_one
from proxydiag.errors import IngestError
from proxydiag.ingest import read_run
from proxydiag.ingest.tabular import csv


@pytest.fixture
def group(tmp_path: Path) -> Path:
    """A folder of three runs (one in a sub-folder)."""
    folder = tmp_path / "group"
    (folder / "sub").mkdir(parents=True)
    for name in ("a.csv", "b.csv", "sub/c.csv"):
        (folder / name).write_text("step,loss\n1,0.5\n2,0.25\n")
    return folder


def test_read_run_refuses_a_folder_of_runs_before_reading_any(
    group: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read(source: Any, ctx: Any) -> Any:
        raise AssertionError(f"read {source}")

    monkeypatch.setattr(csv, "read", read)
    with pytest.raises(IngestError) as info:
        read_run(group)
    assert str(info.value) == (
        f"{group}: holds 3 runs (a.csv, b.csv, sub/c.csv); name one of "
        "them (read_runs() reads them all)"
    )


def test_read_run_of_one_file_in_the_folder(group: Path) -> None:
    run = read_run(group / "sub" / "c.csv")
    assert run.name == "c" and run.series("loss")[1].tolist() == [0.5, 0.25]


def test_load_one_names_the_runs_and_load_reads_them_all(group: Path) -> None:
    with pytest.raises(IngestError, match=r"group: holds 3 runs \(a.csv, b.csv, sub/c.csv\)"):
        load_one(str(group))
    assert sorted(r.name for r in load(str(group))) == ["a", "b", "c"]
    assert load_one(str(group / "a.csv")).name == "a"


def test_an_unknown_source_without_a_store_does_not_mention_one(tmp_path: Path) -> None:
    with pytest.raises(IngestError) as info:
        load("nope")
    assert str(info.value) == "nope: no such file, directory, or MLflow URI"
    with pytest.raises(IngestError) as info:
        load_one("nope", store=tmp_path / "s")
    assert str(info.value) == (
        f"nope: no such file, directory, MLflow URI, or run in store {tmp_path / 's'}"
    )
