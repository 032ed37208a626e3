"""CSV/TSV reader: layouts, NaN spellings, damage, DeepSpeed csv_monitor directories."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import polars as pl
import pytest
from _points import same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import read_run
from proxydiag.ingest.tabular import csv as csv_reader


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def points(path: Path) -> list[tuple[int, str, float]]:
    return read_run(path).frame.sort("key", "step").select("step", "key", "value").rows()


def test_wide_with_every_nan_spelling_bom_and_crlf(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.csv",
        b"\xef\xbb\xbfStep,actor/grad_norm,loss\r\n"
        b"1,nan,0.5\r\n2,inf,\r\n3,-Infinity,null\r\n4,1e308,-1e308\r\n5,NaN,Infinity\r\n",
    )
    run = read_run(path)
    got = run.frame.sort("key", "step").select("step", "key", "value").rows()
    nan, inf = float("nan"), float("inf")
    assert same(
        got,
        [
            (1, "actor/grad_norm", nan),
            (2, "actor/grad_norm", inf),
            (3, "actor/grad_norm", -inf),
            (4, "actor/grad_norm", 1e308),
            (5, "actor/grad_norm", nan),
            (1, "loss", 0.5),
            (3, "loss", nan),
            (4, "loss", -1e308),
            (5, "loss", inf),
        ],
    )
    assert run.mapping == {"grad_norm": "actor/grad_norm", "loss": "loss"}
    assert run.attrs["null_as_nan"] == 1  # the `null`; the empty cell at step 2 is no row


def test_long_form_and_tsv(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "l.tsv",
        b"step\tkey\tvalue\twall_time\n1\tloss\t0.5\t100.5\n"
        b"1\tgrad_norm\t-inf\t100.5\n2\tloss\t\t101.0\n",
    )
    frame = read_run(path).frame.sort("key")
    assert frame.select("step", "key", "value", "wall_time").rows() == [
        (1, "grad_norm", float("-inf"), 100.5),
        (1, "loss", 0.5, 100.5),
    ]


def test_non_numeric_cell_names_line_and_column(tmp_path: Path) -> None:
    rows = b"".join(b"%d,1.5\n" % i for i in range(1, 417))
    path = write(tmp_path, "metrics.csv", b"step,actor/grad_norm\n" + rows + b"417,abc\n")
    with pytest.raises(IngestError) as info:
        read_run(path)
    assert str(info.value) == f"{path}:418: 'abc' is not a number in column actor/grad_norm"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"step,a\n1,2\n2,3,4\n", ":3: 3 fields where the header has 2"),
        (b"step,a,b\n1,2,3\n2,3\n4,5,6\n", ":3: 2 fields where the header has 3"),
        (b"step,a\n99999999999999999999,2\n", ":2: step '99999999999999999999' is not an integer"),
        (b"step,a\n1.5,2\n", ":2: step '1.5' is not an integer"),
        (b"loss,a\n1,2\n", ":1: no step column"),
        (b"", ": empty file"),
        (b"step,a\n", ": a header and no data rows"),
        (b"step,a\n1,\xff\xfe\n", "UTF-8"),
    ],
)
def test_bad_csv_is_one_line_naming_the_place(tmp_path: Path, content: bytes, message: str) -> None:
    path = write(tmp_path, "bad.csv", content)
    with pytest.raises(IngestError) as info:
        read_run(path)
    text = str(info.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_cut_last_line_is_dropped_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, "cut.csv", b"step,a,b\n1,2,3\n2,4,5\n3,6")
    with pytest.warns(IngestWarning, match=r"cut.csv:4: the last line is cut \(2 of 3 fields"):
        got = points(path)
    assert got == [(1, "a", 2.0), (2, "a", 4.0), (1, "b", 3.0), (2, "b", 5.0)]


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert points(write(tmp_path, "ok.csv", b"step,a\n1,2\n2,3")) == [
            (1, "a", 2.0),
            (2, "a", 3.0),
        ]


def test_repeated_header_is_a_restart_and_duplicate_columns_are_kept(tmp_path: Path) -> None:
    run = read_run(write(tmp_path, "r.csv", b"step,a\n1,1\n2,2\n3,3\nstep,a\n2,20\n3,30\n"))
    assert run.frame.select("step", "value").rows() == [(1, 1.0), (2, 20.0), (3, 30.0)]
    assert [e.kind for e in run.events] == ["restart"]
    with pytest.warns(IngestWarning, match="column 'a' appears twice"):
        dup = points(write(tmp_path, "d.csv", b"step,a,a\n1,2,3\n"))
    assert dup == [(1, "a", 2.0), (1, "a#2", 3.0)]


def test_blank_lines_label_columns_and_quoted_names(tmp_path: Path) -> None:
    path = write(
        tmp_path, "q.csv", b'step,"rew, mean",phase\n1,0.5,train\n\n2,"0.25",eval\n3,x7,eval\n'
    )
    with pytest.raises(IngestError, match=r"q.csv:5: 'x7' is not a number in column rew, mean"):
        read_run(path)
    run = read_run(write(tmp_path, "p.csv", b"step,a,phase\n1,0.5,train\n\n2,0.25,eval\n"))
    assert run.frame.select("step", "value").rows() == [(1, 0.5), (2, 0.25)]
    assert run.attrs["ignored_columns"] == ["phase"]


def test_deepspeed_csv_monitor_directory_is_one_run(tmp_path: Path) -> None:
    mon = tmp_path / "ds_job"
    mon.mkdir()
    (mon / "Train_Samples_train_loss.csv").write_text("step,train_loss\n64,2.5\n128,2.25\n")
    (mon / "Train_Samples_loss_scale.csv").write_text("step,loss_scale\n64,65536.0\n128,32768.0\n")
    assert csv_reader.can_read(mon)
    run = read_run(mon)
    assert run.attrs["step_kind"] == "samples" and run.attrs["format"] == "deepspeed_csv_monitor"
    assert run.mapping == {
        "loss": "Train/Samples/train_loss",
        "loss_scale": "Train/Samples/loss_scale",
    }
    assert run.series("loss_scale")[1].tolist() == [65536.0, 32768.0]


def test_fast_and_slow_paths_agree(tmp_path: Path) -> None:
    """A `null` forces the text path; every other value must come out the same."""
    body = b"".join(b"%d,%r,%r\n" % (i, i / 7, -i * 1e300) for i in range(1, 200))
    fast = points(write(tmp_path, "f.csv", b"step,a,b\n" + body))
    slow = points(write(tmp_path, "s.csv", b"step,a,b\n" + body + b"200,null,1\n"))
    assert same(slow[:199] + slow[200:399], fast)


finite = st.floats(allow_nan=False, width=64)
cell = st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf]), st.none())


# random holes warn that pandas may have lost NaN there: expected, not what is checked here
@pytest.mark.filterwarnings("ignore::proxydiag.errors.IngestWarning")
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=st.lists(st.tuples(cell, cell), min_size=1, max_size=30))
def test_random_tables_round_trip_exactly(
    tmp_path: Path, table: list[tuple[float | None, float | None]]
) -> None:
    frame = pl.DataFrame(
        {"step": list(range(len(table))), "a": [r[0] for r in table], "b/c": [r[1] for r in table]},
        schema={"step": pl.Int64, "a": pl.Float64, "b/c": pl.Float64},
    )
    path = tmp_path / "h.csv"
    frame.write_csv(path, float_precision=None)
    if frame.select(pl.all().exclude("step").is_null().all()).row(0) == (True, True):
        with pytest.raises(IngestError):
            read_run(path)  # nothing but empty cells: no data
        return
    want = [
        (i, k, v)
        for k, col in (("a", 0), ("b/c", 1))
        for i, r in enumerate(table)
        if (v := r[col]) is not None
    ]
    assert same(points(path), want)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(max_size=300), header=st.sampled_from([b"", b"step,a\n", b"step,key,value\n"])
)
def test_garbage_raises_only_ingest_error(tmp_path: Path, data: bytes, header: bytes) -> None:
    path = tmp_path / "g.csv"
    path.write_bytes(header + data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        try:
            run = read_run(path)
        except IngestError as exc:
            assert "\n" not in str(exc)
            return
    assert run.frame.schema["value"] == pl.Float64


def test_an_empty_column_wins_no_alias(tmp_path: Path) -> None:
    """``loss`` logged nothing, ``train/loss`` did: the canonical ``loss`` is ``train/loss``,
    and a metric without a value is not in the run's mapping."""
    path = tmp_path / "m.csv"
    path.write_text("step,loss,train/loss,grad_norm\n1,,0.5,\n2,,0.4,\n")
    run = read_run(path)
    assert run.mapping == {"loss": "train/loss"}
    assert run.frame["metric"].unique().to_list() == ["loss"]


def test_empty_cells_after_a_column_logged_every_row_warn_that_they_may_be_nan(
    tmp_path: Path,
) -> None:
    """pandas' to_csv writes NaN as an empty cell: a grad norm logged on every row that goes
    empty from step 30 on (an overflow) reads as not logged, and the reader says so. A column
    logged every 5 rows (an eval metric) is no such column."""
    import numpy as np
    import pandas as pd

    n = 60
    grad = np.linspace(0.5, 1.0, n)
    grad[30:] = np.nan
    grad[45] = 2.0
    evals = np.where(np.arange(n) % 5 == 0, 0.7, np.nan)
    path = tmp_path / "run.csv"
    pd.DataFrame(
        {"step": np.arange(n), "loss": np.ones(n), "grad_norm": grad, "eval/acc": evals}
    ).to_csv(path, index=False)
    with pytest.warns(IngestWarning) as caught:
        run = read_run(path)
    texts = [str(w.message) for w in caught if issubclass(w.category, IngestWarning)]
    assert len(texts) == 1 and "'grad_norm' (29 from step 30)" in texts[0], texts
    assert "eval/acc" not in texts[0] and "na_rep='nan'" in texts[0]
    steps, values = run.series("grad_norm")
    assert steps.size == 31 and np.isfinite(values).all()  # read as not logged, as written
    path.write_text(path.read_text().replace(",,", ",nan,"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        assert read_run(path).series("grad_norm")[0].size == n


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_empty_grad_norms_beside_a_loss_scale_halving_are_skipped_steps_not_lost_nan(
    tmp_path: Path, fmt: str
) -> None:
    """An fp16 Megatron run logs no gradient norm on the iterations around an overflow (the
    loss scale halves): those empty cells are skipped steps, and the reader does not warn
    that they may be NaN (the demo did, for its own samples). An empty cell away from a
    halving still warns. The Parquet file is big enough to be read in parts of its columns,
    the loss scale in another part than the gradient norm."""
    import numpy as np

    n = 10_000
    rng = np.random.default_rng(0)
    scale = np.full(n, 8192.0)
    scale[5001:] = 4096.0  # an overflow at 5000: the lower scale logged from 5001
    grad = rng.random(n)
    grad[[5000, 5001]] = np.nan  # empty on both sides of the halving
    fillers = {f"h/{i:02d}": rng.random(n) for i in range(20)}
    table = pl.DataFrame({"step": np.arange(n), "grad-norm": grad, **fillers, "loss-scale": scale})
    table = table.with_columns(pl.col("grad-norm").fill_nan(None))  # an empty cell
    path = tmp_path / f"run.{fmt}"
    if fmt == "csv":
        table.write_csv(path)
    else:
        table.write_parquet(path)
        assert path.stat().st_size >= 1 << 20  # the parts route
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        assert read_run(path).series("grad_norm")[0].size == n - 2
    lost = table.with_columns(
        pl.when(pl.col("step") == 7000).then(None).otherwise(pl.col("grad-norm")).alias("grad-norm")
    )
    if fmt == "csv":
        lost.write_csv(path)
    else:
        lost.write_parquet(path)
    with pytest.warns(IngestWarning, match=r"'grad-norm' \(1 from step 7000\)"):
        read_run(path)
    # a loss that went empty beside the halving still warns (a collapse halves the scale on
    # every step while its loss turns NaN, which pandas would lose)
    lost = table.with_columns(
        pl.when(pl.col("step") == 5001).then(None).otherwise(pl.col("h/00")).alias("lm loss")
    )
    if fmt == "csv":
        lost.write_csv(path)
    else:
        lost.write_parquet(path)
    with pytest.warns(IngestWarning, match=r"'lm loss' \(1 from step 5001\)"):
        read_run(path)


def test_empty_cells_warning_sees_a_nan_tail_and_not_eval_rows(tmp_path: Path) -> None:
    """A diverged run's last rows, every metric NaN (pandas leaves only the step): warned.
    HF Trainer's eval records share a step with a training record and leave its columns
    empty: not warned."""
    import numpy as np
    import pandas as pd

    n = 100
    loss = np.linspace(2.0, 1.0, n)
    loss[60:] = np.nan
    tail = tmp_path / "tail.csv"
    pd.DataFrame({"step": np.arange(n), "loss": loss, "grad_norm": loss / 2}).to_csv(
        tail, index=False
    )
    with pytest.warns(
        IngestWarning, match=r"'loss' \(40 from step 60\), 'grad_norm' \(40 from step 60\)"
    ):
        read_run(tail)
    rows = [{"step": s, "loss": 2.0 - s / 1000, "learning_rate": 1e-4} for s in range(0, 300, 10)]
    rows += [{"step": s, "eval_loss": 1.7} for s in (100, 200)]
    hf = tmp_path / "hf.csv"
    pd.DataFrame(rows).sort_values("step", kind="stable").to_csv(hf, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        assert read_run(hf).series("loss")[0].size == 30
