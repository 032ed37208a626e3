"""Parquet tables and HF trainer_state.json."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import polars as pl
import pytest

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import read_run
from proxydiag.ingest.tabular.trainer_state import NAN_FILTER_NOTE

NAN, INF = float("nan"), float("inf")


def test_parquet_wide_from_pandas_keeps_inf(tmp_path: Path) -> None:
    """pandas turns NaN into a Parquet null when it writes (pyarrow's from_pandas), so a
    pandas NaN arrives as no row; ±inf and ±1e308 survive."""
    path = tmp_path / "w.parquet"
    pd.DataFrame(
        {"global_step": [1, 2, 3], "loss": [0.5, NAN, 0.25], "grad_norm": [INF, -INF, 1e308]}
    ).to_parquet(path)
    got = read_run(path).frame.sort("key", "step").select("step", "key", "value").rows()
    assert got[:3] == [(1, "grad_norm", INF), (2, "grad_norm", -INF), (3, "grad_norm", 1e308)]
    assert got[3:] == [(1, "loss", 0.5), (3, "loss", 0.25)]


def test_parquet_null_is_no_row(tmp_path: Path) -> None:
    path = tmp_path / "n.parquet"
    pl.DataFrame({"step": [1, 2], "loss": [None, NAN]}).write_parquet(path)
    got = read_run(path).frame.select("step", "value").rows()
    assert len(got) == 1 and got[0][0] == 2 and math.isnan(got[0][1])


def test_parquet_long_from_polars(tmp_path: Path) -> None:
    path = tmp_path / "l.parquet"
    pl.DataFrame({"step": [1, 2], "key": ["a", "b"], "value": [0.5, NAN]}).write_parquet(path)
    got = read_run(path).frame.sort("key").select("step", "key", "value").rows()
    assert got[0] == (1, "a", 0.5) and got[1][:2] == (2, "b") and math.isnan(got[1][2])


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (
            pl.DataFrame({"step": [1.0, 2.5], "loss": [1.0, 2.0]}),
            "@row 1: step '2.5' is not an integer",
        ),
        (
            pl.DataFrame({"step": [1, 2], "loss": ["1.0", "x"]}),
            "@row 1: 'x' is not a number in column loss",
        ),
        (pl.DataFrame({"epoch": [1, 2], "loss": [1.0, 2.0]}), ": no step column"),
    ],
)
def test_bad_parquet(tmp_path: Path, frame: pl.DataFrame, message: str) -> None:
    path = tmp_path / "bad.parquet"
    frame.write_parquet(path)
    with pytest.raises(IngestError, match=message.replace("(", r"\(")):
        read_run(path)


def test_truncated_parquet_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pl.DataFrame({"step": [1], "a": [1.0]}).write_parquet(path)
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(
        IngestError, match=r"t.parquet: cannot read as Parquet .*is the file complete"
    ):
        read_run(path)


def test_trainer_state_log_history(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "checkpoint-30"
    folder.mkdir(parents=True)
    state = {
        "global_step": 30,
        "logging_steps": 10,
        "train_batch_size": 8,
        "log_history": [
            {"epoch": 0.1, "grad_norm": NAN, "learning_rate": 5e-5, "loss": 2.3, "step": 10},
            {"epoch": 0.2, "grad_norm": INF, "learning_rate": 4e-5, "loss": 2.1, "step": 20},
            {"epoch": 0.2, "eval_loss": 2.2, "eval_runtime": 1.5, "step": 20},
            {
                "epoch": 0.3,
                "step": 30,
                "train_loss": 2.2,
                "train_runtime": 10.0,
                "total_flos": 1e12,
            },
        ],
    }
    (folder / "trainer_state.json").write_text(json.dumps(state, indent=2))
    run = read_run(folder / "trainer_state.json")
    assert run.name == "out" and run.attrs["log_interval"] == 10
    assert run.attrs["summary"]["train_runtime"] == 10.0 and NAN_FILTER_NOTE in run.attrs["notes"]
    assert run.mapping == {"grad_norm": "grad_norm", "loss": "loss", "lr": "learning_rate"}
    steps, values = run.series("grad_norm")
    assert steps.tolist() == [10, 20] and math.isnan(values[0]) and values[1] == INF
    assert run.series("eval_loss")[1].tolist() == [2.2]
    assert run.series("lr")[1].tolist() == [5e-5, 4e-5]


def test_trainer_state_damaged(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": [{"step": 1, "loss": 2.0},\n')
    with pytest.raises(IngestError, match=r"trainer_state.json:2: invalid JSON"):
        read_run(path)


def test_parquet_unsigned_step_overflow_and_decimal_values(tmp_path: Path) -> None:
    import decimal

    big = tmp_path / "u.parquet"
    pl.DataFrame({"step": pl.Series([1, 2**63], dtype=pl.UInt64), "a": [1.0, 2.0]}).write_parquet(
        big
    )
    with pytest.raises(
        IngestError, match=r"u.parquet@row 1: step 9223372036854775808 does not fit"
    ):
        read_run(big)
    dec = tmp_path / "d.parquet"
    pl.DataFrame(
        {
            "step": [1, 2],
            "a": pl.Series(
                [decimal.Decimal("1.5"), decimal.Decimal("2.25")], dtype=pl.Decimal(10, 2)
            ),
        }
    ).write_parquet(dec)
    assert read_run(dec).frame["value"].to_list() == [1.5, 2.25]


def test_a_missing_step_column_reads_the_same_in_csv_jsonl_and_parquet(tmp_path: Path) -> None:
    """One rule, one message: the tabular readers share ``tabular.step_column``."""
    (tmp_path / "m.csv").write_text("epoch,loss\n1,0.5\n")
    (tmp_path / "m.jsonl").write_text('{"epoch": 1, "loss": 0.5}\n')
    pl.DataFrame({"epoch": [1], "loss": [0.5]}).write_parquet(tmp_path / "m.parquet")
    hint = (
        "no step column (expected one of step, _step, global_step, trainer/global_step, "
        "train/global_step, iteration, ...); rename or add it"
    )
    got = {}
    for name in ("m.csv", "m.jsonl", "m.parquet"):
        with pytest.raises(IngestError) as info:
            read_run(tmp_path / name)
        got[name] = str(info.value)
    assert got == {
        "m.csv": f"{tmp_path / 'm.csv'}:1: {hint}",
        "m.jsonl": f"{tmp_path / 'm.jsonl'}:1: {hint}",
        "m.parquet": f"{tmp_path / 'm.parquet'}: {hint}",
    }


def test_sniffing_csv_and_jsonl_by_suffix_or_content(tmp_path: Path) -> None:
    from proxydiag.ingest.tabular import csv, jsonl

    files = {
        "a.log": b"step,loss\n1,0.5\n",
        "b.log": b"\xef\xbb\xbfglobal_step\tloss\n1\t0.5\n",
        "c.log": b'{"step": 1, "loss": 0.5}\n',
        "d.log": b'{"loss": 0.5}\n',
        "e.csv": b"anything",
        "f.ndjson": b"anything",
        "g.log": b"loss,step\n0.5,1\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "dir.csv").mkdir()
    names = [*files, "dir.csv", "missing.csv"]
    assert [n for n in names if csv.can_read(tmp_path / n)] == ["a.log", "b.log", "e.csv"]
    assert [n for n in names if jsonl.can_read(tmp_path / n)] == ["c.log", "f.ndjson"]


@pytest.mark.parametrize("long", [False, True], ids=["wide", "long"])
@pytest.mark.parametrize("write", ["csv", "csv twice", "csv dates", "parquet"])
def test_a_pandas_row_index_is_not_a_metric(tmp_path: Path, write: str, long: bool) -> None:
    """pandas writes its row index beside the data unless told not to: an empty header cell
    in CSV (``Unnamed: 0`` once read and written again), ``__index_level_0__`` in Parquet for
    an index that is not 0..n-1. It is listed in ``ignored_columns``, not read as a metric;
    dates there keep the typed read."""
    frame = (
        pd.DataFrame({"step": [1, 2, 3], "key": ["loss"] * 3, "value": [0.5, 0.4, 0.3]})
        if long
        else pd.DataFrame({"step": [1, 2, 3], "loss": [0.5, 0.4, 0.3]})
    )
    frame.index = (
        pd.date_range("2024-01-01", periods=3) if write == "csv dates" else pd.Index([10, 11, 12])
    )
    path = tmp_path / ("run.parquet" if write == "parquet" else "run.csv")
    if write == "parquet":
        frame.to_parquet(path)
    else:
        frame.to_csv(path)
        if write == "csv twice":
            pd.read_csv(path).to_csv(path)
    run = read_run(path)
    assert run.frame.select("step", "metric", "value").rows() == [
        (1, "loss", 0.5),
        (2, "loss", 0.4),
        (3, "loss", 0.3),
    ]
    expected = {
        "csv": [""],
        "csv twice": ["", "Unnamed: 0"],
        "csv dates": [""],
        "parquet": ["__index_level_0__"],
    }
    assert run.attrs["ignored_columns"] == expected[write]


@pytest.mark.parametrize("long", [False, True], ids=["wide", "long"])
@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_a_reset_pandas_index_is_not_a_metric(tmp_path: Path, fmt: str, long: bool) -> None:
    """``df.reset_index()`` makes the row index a column named ``index`` (``level_0`` when
    there is one already). Found in a review: beside a long table it made the table wide, with
    metrics ``index`` and ``value`` and the keys dropped as a label column."""
    frame = (
        pd.DataFrame(
            {"step": [1, 1, 2, 2], "key": ["loss", "lr"] * 2, "value": [0.5, 1e-4, 0.4, 2e-4]}
        )
        if long
        else pd.DataFrame({"step": [1, 2], "loss": [0.5, 0.4], "lr": [1e-4, 2e-4]})
    )
    frame = frame.reset_index().reset_index()  # index, then level_0
    path = tmp_path / f"run.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True)
    run = read_run(path)
    assert sorted(run.frame.select("step", "metric", "value").rows()) == [
        (1, "loss", 0.5),
        (1, "lr", 1e-4),
        (2, "loss", 0.4),
        (2, "lr", 2e-4),
    ]
    assert sorted(run.attrs["ignored_columns"]) == ["index", "level_0"]


@pytest.mark.parametrize("long", [False, True], ids=["wide", "long"])
def test_a_pandas_multiindex_is_not_a_metric(tmp_path: Path, long: bool) -> None:
    """Found in review: an unnamed two-level index leaves two empty header cells; the second,
    renamed ``#2``, is an index level too (no warning), and a long table stays long."""
    index = pd.MultiIndex.from_arrays([[1, 1, 2], [5, 6, 7]])
    frame = (
        pd.DataFrame(
            {"step": [1, 2, 3], "key": ["loss"] * 3, "value": [0.5, 0.4, 0.3]}, index=index
        )
        if long
        else pd.DataFrame({"step": [1, 2, 3], "loss": [0.5, 0.4, 0.3]}, index=index)
    )
    path = tmp_path / "mi.csv"
    frame.to_csv(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_run(path)
    assert run.frame.select("step", "metric", "value").rows() == [
        (1, "loss", 0.5),
        (2, "loss", 0.4),
        (3, "loss", 0.3),
    ]
    assert run.attrs["ignored_columns"] == ["", "#2"]


@pytest.mark.parametrize(
    ("name", "steps"),
    [("step", range(0, 5)), ("global_step", range(10, 20, 2)), ("step", [3, 4, 8, 9, 12])],
)
def test_parquet_step_written_as_a_pandas_index(
    tmp_path: Path, name: str, steps: Sequence[int]
) -> None:
    """``df.set_index("step").to_parquet()``: evenly spaced steps become a RangeIndex, which
    pandas keeps in the file's metadata only (start, stop, step); uneven ones stay a column."""
    path = tmp_path / "i.parquet"
    losses = [0.5, 0.4, 0.3, 0.2, 0.1]
    pd.DataFrame({name: list(steps), "loss": losses}).set_index(name).to_parquet(path)
    run = read_run(path)
    assert run.frame.select("step", "value").rows() == list(zip(steps, losses, strict=True))


def test_parquet_unnamed_range_index_is_still_no_step_column(tmp_path: Path) -> None:
    path = tmp_path / "u.parquet"
    pd.DataFrame({"loss": [0.5, 0.4]}).to_parquet(path)
    with pytest.raises(IngestError, match="no step column"):
        read_run(path)


def test_jsonl_records_of_one_point_each_are_the_long_form(tmp_path: Path) -> None:
    """``{"step", "key", "value"}`` records (a metrics table exported one point per line) are
    read long, as in CSV and Parquet: NaN tokens and nulls kept as NaN, a bad value named by
    its line."""
    path = tmp_path / "points.jsonl"
    path.write_text(
        '{"step": 1, "key": "loss", "value": 0.5}\n'
        '{"step": 1, "key": "grad_norm", "value": NaN}\n'
        '{"step": 2, "key": "loss", "value": null}\n'
    )
    run = read_run(path)
    rows = sorted(run.frame.select("step", "metric", "value").rows())
    assert rows[0] == (1, "grad_norm", pytest.approx(float("nan"), nan_ok=True))
    assert rows[1:] == [(1, "loss", 0.5), (2, "loss", pytest.approx(float("nan"), nan_ok=True))]
    assert run.attrs["null_as_nan"] == 1
    path.write_text(
        '{"step": 1, "key": "loss", "value": 0.5}\n{"step": 2, "key": "loss", "value": "high"}\n'
    )
    with pytest.raises(IngestError, match=r"points\.jsonl:2: 'high' is not a number"):
        read_run(path)


def test_slimes_train_step_column_is_the_step(tmp_path: Path) -> None:
    # found by a blind audit: slime logs its step as train/step (REFERENCE-formats)
    from proxydiag.ingest import read_run

    path = tmp_path / "metrics.csv"
    path.write_text("train/step,train/loss\n1,0.5\n2,0.25\n")
    run = read_run(path)
    assert run.frame.select("step", "key", "value").rows() == [
        (1, "train/loss", 0.5),
        (2, "train/loss", 0.25),
    ]


@pytest.mark.parametrize("steps", [200, 20_000], ids=["small file", "read in parts"])
def test_parquet_nulls_after_a_column_logged_every_row_warn_that_pandas_wrote_nan(
    tmp_path: Path, steps: int
) -> None:
    """pandas' to_parquet writes NaN as null (pyarrow's from_pandas): a grad norm that goes
    null from the middle on reads as not logged, with a warning naming it, on both routes
    (a file of 1 MB or more is read in parts of its columns, side by side)."""
    import numpy as np

    rng = np.random.default_rng(0)
    data = {f"m{i:02d}": rng.normal(size=steps) for i in range(40)}
    data["grad_norm"] = np.where(np.arange(steps) < steps // 2, 1.0, np.nan)
    path = tmp_path / "run.parquet"
    pd.DataFrame({"step": np.arange(steps), **data}).to_parquet(path)
    assert (path.stat().st_size >= 1 << 20) == (steps > 1000)
    with pytest.warns(
        IngestWarning,
        match=rf"'grad_norm' \({steps // 2} from step {steps // 2}\)"
        r".*nan_to_null=False",
    ):
        run = read_run(path)
    assert run.series("grad_norm")[0].size == steps // 2
    pl.from_pandas(
        pd.DataFrame({"step": np.arange(steps), **data}), nan_to_null=False
    ).write_parquet(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        assert np.isnan(read_run(path).series("grad_norm")[1][-1])
