"""The fast paths of the tabular readers against plain Python references (json, csv modules).

JSONL is parsed with the schema of the first records and its keys counted to trust it; CSV is
read typed with quotes taken literally and its rows are scanned only when polars could have
hidden a wrong field count. Whatever path a file takes, the raw frame and the errors must be
those of the reference.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from _points import Point, same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from proxydiag.errors import IngestError
from proxydiag.ingest.tabular import _jsonl_fast, jsonl
from proxydiag.ingest.tabular import csv as csv_reader
from proxydiag.ingest.tabular._bytes import map_file

NAN, INF = float("nan"), float("inf")


def points(raw: pl.DataFrame) -> list[Point]:
    return sorted(raw.select("step", "key", "value").rows(), key=lambda p: (p[1], p[0]))


def test_raw_frame_is_one_block_per_key_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("step,b,a\n3,1,\n5,2,20\n9,,30\n")
    raw, notes = csv_reader.read_table(path)
    assert raw.select("step", "key").rows() == [(3, "b"), (5, "b"), (5, "a"), (9, "a")]
    assert notes.monotonic


# JSONL ------------------------------------------------------------------------------------


def _records(rng: random.Random, n: int, verl: bool, late: bool) -> list[dict[str, Any]]:
    """Records of numbers: absent keys, null, NaN/±inf; when ``late``, a key that appears
    only after the first 100 records, and maybe an integer column that turns float there."""
    names = rng.sample(["loss", "lr", "null_ratio", "d e", "ü", "val/acc"], k=rng.randint(1, 4))
    turns = rng.random() < 0.5
    out = []
    for i in range(n):
        data: dict[str, Any] = {}
        for name in names:
            if rng.random() < 0.3:
                continue  # not logged at this step
            data[name] = rng.choice([rng.gauss(0, 1), rng.gauss(0, 1), None, NAN, INF, -INF, 0.0])
        if late and i >= 100:
            data["late/x"] = rng.choice([rng.random(), None])
        if late and turns:
            data["count"] = 1.5 if i >= 100 else i
        out.append({"step": i, "data": data} if verl else {"step": i, **data})
    return out


def _dump(record: dict[str, Any], style: str) -> str:
    if style == "python":  # json.dumps: NaN and Infinity tokens
        return json.dumps(record)

    def finite(v: Any) -> Any:  # orjson: non-finite written as null
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return json.dumps(finite(record), separators=(",", ":"), ensure_ascii=False)


def _json_reference(text: str) -> tuple[list[Point], int]:
    """What the file holds, by the json module: null is NaN (and counted), absent is no row."""
    out, nulls = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        flat = {**{k: v for k, v in record.items() if k != "data"}, **record.get("data", {})}
        step = flat.pop("step")
        for key, value in flat.items():
            nulls += value is None
            out.append((step, key, NAN if value is None else float(value)))
    return sorted(out, key=lambda p: (p[1], p[0])), nulls


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.sampled_from([1, 7, 100, 101, 160]),
    verl=st.booleans(),
    style=st.sampled_from(["python", "orjson"]),
    late=st.booleans(),
    blank=st.booleans(),
)
def test_jsonl_matches_the_json_module(
    tmp_path: Path, seed: int, n: int, verl: bool, style: str, late: bool, blank: bool
) -> None:
    lines = [_dump(r, style) for r in _records(random.Random(seed), n, verl, late)]
    text = "".join(
        line + ("\n\n" if blank and i % 50 == 3 else "\n") for i, line in enumerate(lines)
    )
    path = tmp_path / "h.jsonl"
    path.write_text(text, encoding="utf-8")
    want, nulls = _json_reference(text)
    if not want:
        with pytest.raises(IngestError, match="no metric values"):
            jsonl.read_table(path)
        return
    raw, notes, _ = jsonl.read_table(path)
    assert same(points(raw), want)
    assert notes.null_as_nan == nulls


def test_jsonl_keys_after_the_first_hundred_records(tmp_path: Path) -> None:
    """The schema of the first records misses a key, a float, a value of a null column:
    the key count gives it away and every record's schema is used."""
    path = tmp_path / "late.jsonl"
    rows: list[dict[str, Any]] = [{"step": i, "data": {"a": i, "b": None}} for i in range(150)]
    rows[120]["data"].update({"a": 0.5, "b": 2.0, "c": None})
    rows[140]["data"]["d"] = 1e308
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    raw, notes, verl = jsonl.read_table(path)
    got = {k: raw.filter(pl.col("key") == k)["value"].to_list() for k in ("a", "b", "c", "d")}
    assert got["a"][119:121] == [119.0, 0.5] and len(got["a"]) == 150
    assert sum(math.isnan(v) for v in got["b"]) == 149 and got["b"][120] == 2.0
    assert math.isnan(got["c"][0]) and got["d"] == [1e308]
    assert notes.null_as_nan == 150 and verl


@pytest.mark.parametrize("style", ["orjson", "python"])
@pytest.mark.parametrize("verl", [True, False], ids=["verl", "flat"])
def test_jsonl_late_keys_are_read_from_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str, verl: bool
) -> None:
    """veRL logs validation scores every N steps: keys the first records lack are read from
    the lines that hold them (no second parse of the file), and the run is the one that
    parsing every record's schema gives."""
    rng = random.Random(7)
    records = []
    for i in range(400):
        data: dict[str, Any] = {"loss": rng.choice([rng.random(), None, NAN, INF]), "lr": 1e-6}
        if i >= 150 and i % 50 == 0:
            data["val/acc"] = rng.choice([rng.random(), None, 3])
            data["timing_s/testing"] = 12.5
        records.append({"step": i, "data": data} if verl else {"step": i, **data})
    path = tmp_path / "late.jsonl"
    path.write_text("".join(_dump(r, style) + "\n" for r in records), encoding="utf-8")
    found = []
    late_columns = _jsonl_fast._late_columns

    def spy(*args: Any) -> Any:
        found.append(late_columns(*args))
        return found[-1]

    monkeypatch.setattr(_jsonl_fast, "_late_columns", spy)
    raw, notes, _ = jsonl.read_table(path)
    assert found and found[-1] is not None
    assert sorted(s.name for s in found[-1][0]) == ["timing_s/testing", "val/acc"]
    want, nulls = _json_reference(path.read_text(encoding="utf-8"))
    assert same(points(raw), want) and notes.null_as_nan == nulls
    monkeypatch.setattr(_jsonl_fast, "_late_columns", lambda *args: None)  # every record's schema
    again, notes_again, _ = jsonl.read_table(path)
    assert same(points(again), points(raw)) and notes_again.null_as_nan == notes.null_as_nan


@pytest.mark.parametrize(
    "line",
    [
        '{"step": 300, "data": {"loss": 0.5, "note": "eval"}}',  # a string
        '{"step": 300, "data": {"loss": 0.5, "flag": true}}',  # a boolean
        '{"step": 300, "data": {"loss": 0.5, "deep": {"x": 1}}}',  # an object
        '{"step": 300, "extra": 1, "data": {"loss": 0.5}}',  # a key beside veRL's two
        '{"step": 300, "data": {"loss": 0.5, "big": 1' + "0" * 400 + "}}",  # beyond any float
    ],
)
def test_jsonl_late_keys_that_are_not_numbers_read_as_every_record_says(
    tmp_path: Path, line: str
) -> None:
    """A late key holding anything but a number leaves the late-key shortcut to the parse of
    every record: the reader's answer is the one it gives either way."""
    path = tmp_path / "odd.jsonl"
    path.write_text(
        "".join(json.dumps({"step": i, "data": {"loss": 0.1 * i}}) + "\n" for i in range(300))
        + line
        + "\n"
    )
    assert _jsonl_fast._trusted_head(map_file(path), path) is None
    raw, _, _ = jsonl.read_table(path)
    assert raw.filter(pl.col("key") == "loss").height == 301


@pytest.mark.parametrize(
    "tail",
    [
        ['{"step": 100, "data": {"loss": 1.0, "val": 2.0}}', '{"step": 101, "data": null}'],
        ['{"step": 100, "data": null}', '{"step": 101, "data": {"loss": 1.0, "val": 2.0}}'],
    ],
    ids=["null data after a late key", "null data before it"],
)
def test_jsonl_a_null_data_object_beside_late_keys_is_a_nan(
    tmp_path: Path, tail: list[str]
) -> None:
    """Found in review: a veRL record whose "data" is null has as many keys as a record with
    an object, so only the file's total key count shows it; it is a NaN point named data."""
    path = tmp_path / "n.jsonl"
    path.write_text(
        "".join(f'{{"step": {i}, "data": {{"loss": 1.0}}}}\n' for i in range(100))
        + "".join(line + "\n" for line in tail)
    )
    raw, notes, _ = jsonl.read_table(path)
    nulls = [json.loads(line)["step"] for line in tail if '"data": null' in line]
    assert notes.null_as_nan == 1
    assert same(points(raw.filter(pl.col("key") == "data")), [(nulls[0], "data", NAN)])
    assert raw.filter(pl.col("key") == "val").height == 1
    assert raw.filter(pl.col("key") == "loss").height == 101


@pytest.mark.parametrize("late_lines", [1, 70], ids=["late-key path", "every record's schema"])
def test_jsonl_a_key_named_data_inside_veRLs_data_is_kept(tmp_path: Path, late_lines: int) -> None:
    """Found in review: a field named data inside veRL's data replaced the struct it came from
    and was deleted with it; both parse paths now keep it."""
    path = tmp_path / "d.jsonl"
    head = [f'{{"step": {i}, "data": {{"loss": 1.0}}}}' for i in range(100)]
    late = [
        f'{{"step": {i}, "data": {{"loss": 1.0, "data": 2.0}}}}'
        for i in range(100, 100 + late_lines)
    ]
    path.write_text("".join(line + "\n" for line in head + late))
    raw, _, _ = jsonl.read_table(path)
    assert raw.filter(pl.col("key") == "data")["value"].to_list() == [2.0] * late_lines
    assert raw.filter(pl.col("key") == "loss").height == 100 + late_lines


def test_jsonl_file_named_like_a_glob_reads_itself(tmp_path: Path) -> None:
    (tmp_path / "run1.jsonl").write_text('{"step": 1, "other": 9.0}\n')
    path = tmp_path / "run[1].jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n')
    raw, _, _ = jsonl.read_table(path)
    assert points(raw) == [(1, "loss", 0.5)]


# CSV --------------------------------------------------------------------------------------

SPELLINGS = [
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-Infinity",
    "Infinity",
    "null",
    "None",
    "",
    "1e308",
    "-0.0",
]


def _csv_reference(text: str) -> tuple[list[Point], int]:
    """What a well-formed table holds, by the csv module: empty is no row, null/None NaN."""
    rows = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    header, out, nulls = rows[0], [], 0
    long = header[:3] == ["step", "key", "value"]
    for row in rows[1:]:
        cells = [(row[1], row[2])] if long else list(zip(header[1:], row[1:], strict=True))
        for key, cell in cells:
            word = cell.strip().lower()
            if word:
                nulls += word in ("null", "none")
                out.append((int(row[0]), key, NAN if word in ("null", "none") else float(word)))
    return sorted(out, key=lambda p: (p[1], p[0])), nulls


# generated tables have empty cells anywhere: the empty-cell warning is expected, not checked here
@pytest.mark.filterwarnings("ignore::proxydiag.errors.IngestWarning")
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 40),
    long=st.booleans(),
    quote=st.booleans(),
    crlf=st.booleans(),
    blank=st.booleans(),
)
def test_csv_matches_the_csv_module(
    tmp_path: Path, seed: int, n: int, long: bool, quote: bool, crlf: bool, blank: bool
) -> None:
    rng = random.Random(seed)

    def cell() -> str:
        text = rng.choice([repr(rng.gauss(0, 1)), repr(rng.gauss(0, 1)), *SPELLINGS])
        return f'"{text}"' if quote and rng.random() < 0.2 else text

    header = ["step", "key", "value"] if long else ["step", "a", "b/c", "d e"]
    keys = ["loss", '"lr"', '"lo,ss"'] if quote else ["loss", "lr"]
    rows = [
        [str(i), rng.choice(keys), cell()] if long else [str(i), cell(), cell(), cell()]
        for i in range(n)
    ]
    lines = [",".join(header), *(",".join(r) for r in rows)]
    if blank:
        lines.insert(rng.randint(1, len(lines)), "")
    nl = "\r\n" if crlf else "\n"
    text = nl.join(lines) + nl
    path = tmp_path / "h.csv"
    path.write_text(text, encoding="utf-8", newline="")
    want, nulls = _csv_reference(text)
    if not want:
        with pytest.raises(IngestError, match="no metric values"):
            csv_reader.read_table(path)
        return
    raw, notes = csv_reader.read_table(path)
    assert same(points(raw), want)
    assert notes.null_as_nan == nulls


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"step,a,b\n1,2,3\n2,4,5\n3,6,7,",
            ":4: 4 fields where the header has 3",
        ),  # polars takes it
        (b"step,a,b\n1,2,3\n2,4,5\n3,6,7,8", ":4: 4 fields where the header has 3"),
        (b"step,a,b\n1,2,3\n\n2,4\n3,6,7\n", ":4: 2 fields where the header has 3"),
        (b'step,a,b\n1,"2",3\n2,4\n3,6,7\n', ":3: 2 fields where the header has 3"),
        (b'step,a,b\n1,"2",3\n2,4,5,6\n3,6,7\n', ":3: 4 fields where the header has 3"),
        (b"step,a,b\n1,2,3\n   \n3,6,7\n", ":3: 1 fields where the header has 3"),
        (
            b'step,key,value\n1,"lo,ss",0.5\n2,"a\nb",0.25\n3,x\n',
            ":5: 2 fields where the header has 3",
        ),
    ],
)
def test_csv_rows_with_another_field_count(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "r.csv"
    path.write_bytes(content)
    with pytest.raises(IngestError) as info:
        csv_reader.read_table(path)
    assert str(info.value) == f"{path}{message}; fix or remove the row"


def test_csv_quoted_keys_and_a_text_wall_time(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('step,key,value\n1,"loss",0.5\n2,"a""b",0.25\n')
    assert points(csv_reader.read_table(path)[0]) == [(2, 'a"b', 0.25), (1, "loss", 0.5)]
    path.write_text('step,key,value\n1,"lo,ss",0.5\n2,"a\nb",0.25\n')
    assert points(csv_reader.read_table(path)[0]) == [(2, "a\nb", 0.25), (1, "lo,ss", 0.5)]
    dated = tmp_path / "d.csv"
    dated.write_text("step,timestamp,loss\n1,2024-01-01,0.5\n2,2024-01-02,0.25\n")
    raw, notes = csv_reader.read_table(dated)
    assert raw.rows() == [(1, "loss", 0.5, None), (2, "loss", 0.25, None)]
    assert notes.ignored_columns == ["timestamp"]


def spy_parquet_reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``columns`` asked of each ``pl.read_parquet`` from here on (None: all), with polars
    seeming to have two threads."""
    reads: list[Any] = []
    real = pl.read_parquet

    def spy(*args: Any, **kwargs: Any) -> pl.DataFrame:
        reads.append(kwargs.get("columns"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pl, "read_parquet", spy)
    monkeypatch.setattr(pl, "thread_pool_size", lambda: 2)
    return reads


# the table's random holes warn on both routes; what is checked is that the routes agree
@pytest.mark.filterwarnings("ignore::proxydiag.errors.IngestWarning")
@pytest.mark.parametrize(
    "variant", ["plain", "wall times", "restart", "an empty key", "text", "three row groups"]
)
def test_parquet_read_and_unpivoted_in_parts_equals_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    """A big wide file (one row group or several) is read and unpivoted in parts of its
    columns, each part on its own thread with the step column: the same Run as one whole
    read. A file the straight route cannot take (steps that go back, a key without values, a
    column of text) is read whole, as before."""
    from proxydiag.ingest import read_run
    from proxydiag.ingest.tabular import parquet

    rng = random.Random(11)
    n = 4_000
    steps = list(range(0, 2 * n, 2))
    if variant == "restart":
        steps[n // 2 :] = [s - 100 for s in steps[n // 2 :]]
    columns: dict[str, Any] = {"__index_level_0__": list(range(n)), "step": steps}
    if variant == "wall times":
        columns["timestamp"] = [1.7e9 + i for i in range(n)]
    for i in range(40):
        columns[f"zz/m{i:02d}"] = [
            rng.choice([NAN, INF, -INF, None]) if rng.random() < 0.01 else rng.gauss(0, 1)
            for _ in range(n)
        ]
    # aliases among them (a run of renamed keys between kept ones) and a cumulative counter
    columns["actor/grad_norm"] = [rng.random() for _ in range(n)]
    columns["actor/entropy"] = [rng.random() for _ in range(n)]
    columns["ds_skipped"] = [float(i // 500) for i in range(n)]
    columns["aa/first"] = [float(i) for i in range(n)]
    if variant == "an empty key":
        columns["actor/pg_loss"] = pl.Series([None] * n, dtype=pl.Float64)
    if variant == "text":
        columns["phase"] = ["train"] * n
    path = tmp_path / "wide.parquet"
    pl.DataFrame(columns).write_parquet(
        path, row_group_size=-(-n // 3) if variant == "three row groups" else None
    )
    assert path.stat().st_size >= parquet._PARALLEL_BYTES
    reads = spy_parquet_reads(monkeypatch)
    parts = read_run(path)
    fused = [r for r in reads if r is not None and r[0] == "step" and len(r) < len(columns) - 2]
    # the running total of skipped steps, read once for every part's empty-cell check
    signs = [r for r in reads if r == ["ds_skipped"]]
    straight = variant in ("plain", "wall times", "three row groups")
    # steps that go back and a key without values are found by the parts, then read whole
    assert len(fused) == (0 if variant == "text" else 2)
    assert len(signs) == (0 if variant == "text" else 1)
    assert (len(reads) == len(fused) + len(signs)) == straight
    monkeypatch.setattr(parquet, "_PARALLEL_BYTES", 1 << 40)
    whole = read_run(path)
    assert_frame_equal(parts.frame, whole.frame, check_exact=True)
    assert parts.attrs == whole.attrs and parts.mapping == whole.mapping
    assert parts.events == whole.events
    assert {"grad_norm", "entropy", "skipped_total", "aa/first"} <= set(parts.frame["metric"])
    assert parts.attrs["ignored_columns"][0] == "__index_level_0__"


# the table's random holes warn on both routes; what is checked is that the routes agree
@pytest.mark.filterwarnings("ignore::proxydiag.errors.IngestWarning")
@pytest.mark.parametrize("row_groups", [1, 3])
def test_parquet_read_in_parts_of_columns_equals_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_groups: int
) -> None:
    """A single-row-group file of 1 MB or more is read as parts of its columns, side by side;
    a file of several row groups in one read (polars reads those side by side itself). The
    run is the same either way: NaN, ±inf, empty cells, a label and a pandas index kept."""
    from proxydiag.ingest import read_run
    from proxydiag.ingest.tabular import parquet

    rng = random.Random(7)
    n = 4_000
    columns: dict[str, Any] = {
        "__index_level_0__": list(range(n)),
        "step": list(range(0, 2 * n, 2)),
    }
    for i in range(40):
        columns[f"actor/m{i:02d}"] = [
            rng.choice([NAN, INF, -INF, None]) if rng.random() < 0.01 else rng.gauss(0, 1)
            for _ in range(n)
        ]
    columns["phase"] = ["train"] * n
    columns["actor/grad_norm"] = [rng.random() for _ in range(n)]
    path = tmp_path / "wide.parquet"
    pl.DataFrame(columns).write_parquet(path, row_group_size=-(-n // row_groups))
    assert path.stat().st_size >= parquet._PARALLEL_BYTES
    reads = spy_parquet_reads(monkeypatch)
    parts = read_run(path)
    assert len(reads) == (2 if row_groups == 1 else 1)
    assert (reads[0] is None) == (row_groups > 1)
    monkeypatch.setattr(parquet, "_PARALLEL_BYTES", 1 << 40)
    whole = read_run(path)
    assert parts.frame.equals(whole.frame) and parts.attrs == whole.attrs
    assert parts.frame.height == sum(v is not None for c in columns.values() for v in c) - 3 * n
    assert "phase" in parts.attrs["ignored_columns"]
