"""W&B UI history CSV exports: several runs per file, band columns skipped."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from proxydiag import read_runs
from proxydiag.cli import main
from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import detect
from proxydiag.ingest.tabular import csv as csv_reader
from proxydiag.ingest.wandb import export_csv as wandb_csv

EXPORT = (
    '"Step","full - seed 1 - actor/grad_norm","full - seed 1 - actor/grad_norm__MIN",'
    '"full - seed 1 - actor/grad_norm__MAX","proxy-25 - actor/grad_norm",'
    '"proxy-25 - critic/score/mean"\n'
    "0,1.5,1.4,1.6,2.5,0.1\n"
    "1,NaN,NaN,NaN,,0.2\n"
    "2,Infinity,1,Infinity,-Infinity,\n"
)


def test_export_with_two_runs(tmp_path: Path) -> None:
    path = tmp_path / "wandb_export_2024.csv"
    path.write_text(EXPORT)
    assert detect(path) is wandb_csv  # before the generic CSV reader
    runs = {r.name: r for r in read_runs(path)}
    assert sorted(runs) == ["full - seed 1", "proxy-25"]
    full, proxy = runs["full - seed 1"], runs["proxy-25"]
    steps, values = full.series("grad_norm")
    assert steps.tolist() == [0, 1, 2]
    assert values[0] == 1.5 and math.isnan(values[1]) and values[2] == math.inf
    assert proxy.series("grad_norm")[0].tolist() == [0, 2]  # an empty cell is no row
    assert proxy.series("grad_norm")[1].tolist() == [2.5, -math.inf]
    assert proxy.series("reward")[1].tolist() == [0.1, 0.2]
    assert full.attrs["band_columns_skipped"] == ["actor/grad_norm"]
    assert full.id != proxy.id


def test_non_numeric_cell_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text('"Step","a - loss"\n0,1.0\n1,abc\n')
    # the column as the file's header spells it, so that it can be found there
    with pytest.raises(IngestError, match=rf"^{path}:3: 'abc' is not a number in column a - loss$"):
        read_runs(path)


def test_plain_csv_is_not_an_export(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n0,1.0\n")
    assert not wandb_csv.can_read(path)


def _csv_error(path: Path) -> str:
    """What the generic CSV reader says about ``path``."""
    with pytest.raises(IngestError) as info:
        csv_reader.read_table(path)
    return str(info.value)


def test_cut_last_line_is_dropped_with_the_csv_readers_warning(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(EXPORT + "3,2.5,2.4")  # cut mid-write: 3 of 6 fields, no newline
    assert detect(path) is wandb_csv
    with pytest.warns(IngestWarning) as ours:
        runs = {r.name: r for r in read_runs(path)}
    with pytest.warns(IngestWarning) as theirs:
        csv_reader.read_table(path)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    assert str(ours[0].message).startswith(f"{path}:5: the last line is cut (3 of 6 fields")
    assert runs["full - seed 1"].series("grad_norm")[0].tolist() == [0, 1, 2]
    assert runs["proxy-25"].series("reward")[0].tolist() == [0, 1]


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(EXPORT + "3,2.5,2.4,2.6,3.5,0.3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = {r.name: r for r in read_runs(path)}
    assert runs["proxy-25"].series("grad_norm")[0].tolist() == [0, 2, 3]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("3,1,1,1,1,1,1\n", ":5: 7 fields where the header has 6"),
        ("3,1,1\n4,1,1,1,1,1\n", ":5: 3 fields where the header has 6"),
    ],
)
def test_ragged_row_is_the_csv_readers_error(tmp_path: Path, extra: str, message: str) -> None:
    path = tmp_path / "export.csv"
    path.write_text(EXPORT + extra)
    with pytest.raises(IngestError) as info:
        read_runs(path)
    assert str(info.value) == _csv_error(path)
    assert str(info.value).startswith(f"{path}{message}")


def test_ragged_row_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "export.csv"
    path.write_text(EXPORT + "3,1,1\n")
    with pytest.raises(SystemExit) as info:
        main(["ingest", str(path), "--store", str(tmp_path / "store")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path}:5: 3 fields where the header has 6" in err
    assert "Traceback" not in err


def test_quoted_cell_spanning_lines_keeps_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text('"Step","a - loss","a - note"\n0,1.0,"two\nlines"\n1,2.0,x\n2,abc,y\n')
    with pytest.raises(IngestError) as info:
        read_runs(path)
    assert str(info.value) == _csv_error(path)
    assert str(info.value) == f"{path}:5: 'abc' is not a number in column a - loss"


def test_null_cells_are_noted_on_their_run(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(
        '"Step","a - loss","b - loss","b - loss__MIN"\n0,null,NaN,null\n1,0.5,inf,x\n2,null,2.0,1\n'
    )
    runs = {r.name: r for r in read_runs(path)}
    assert runs["a"].attrs["null_as_nan"] == 2 and math.isnan(runs["a"].series("loss")[1][0])
    # b logged a NaN itself, and its band's null and bad cell are not read at all
    assert "null_as_nan" not in runs["b"].attrs and math.isnan(runs["b"].series("loss")[1][0])
    assert runs["b"].attrs["band_columns_skipped"] == ["loss"]


def test_band_columns_are_not_parsed_but_still_count_for_the_shape(tmp_path: Path) -> None:
    # a band cell that is not a number is never read (the typed read leaves the band out)
    path = tmp_path / "export.csv"
    path.write_text(
        '"Step","a - loss__MIN","a - loss","a - loss__MAX"\n0,oops,1.0,1.1\n1,0.4,0.5,0.6\n'
    )
    (run,) = read_runs(path)
    assert run.series("loss")[1].tolist() == [1.0, 0.5]
    assert run.attrs["band_columns_skipped"] == ["loss"]
    # the file's last column is a band: a short row is still the CSV reader's error
    path.write_text(path.read_text() + "2,0.1,0.2\n")
    with pytest.raises(IngestError, match=rf"^{path}:4: 3 fields where the header has 4"):
        read_runs(path)


def test_runs_of_other_lengths_in_one_export_raise_no_empty_cell_warning(tmp_path: Path) -> None:
    """A W&B export of a full run and a shorter proxy: the proxy's columns end early, as runs
    do; that is not pandas losing NaN (the generic CSV reader would warn of it)."""
    rows = [f"{s},{1.0 + s / 100},{(2.0 + s / 100) if s < 50 else ''}" for s in range(100)]
    path = tmp_path / "wandb_export.csv"
    path.write_text('"Step","full - train/loss","short - train/loss"\n' + "\n".join(rows) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        runs = {r.name: r for r in read_runs(path)}
    assert runs["short"].series("loss")[0].size == 50
    with pytest.warns(IngestWarning, match="'short - train/loss' \\(50 from step 50\\)"):
        csv_reader.read_table(path)
