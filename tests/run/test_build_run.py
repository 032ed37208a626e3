"""build_run against a plain reference: restart rules, then string keys sorted by metric.

The fast path works on integer key codes, block slices and a stable integer sort; the
reference below hashes and sorts strings the obvious way. Both must give the same frame for
any raw frame: interleaved or blocked keys, restarts, duplicates, aliases, counters, NaN/±inf,
text, ``Enum`` or ``Categorical`` keys.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from proxydiag.frame import SCHEMA, coerce_raw
from proxydiag.ingest.tabular import tables as tabular
from proxydiag.metrics import AliasTable
from proxydiag.run import _grouped, keys, wide
from proxydiag.run import _segments as segments
from proxydiag.run.build import build_run

# canonical names, aliases competing for one metric, a cumulative counter, unmapped keys
POOL = ["loss", "actor/grad_norm", "grad_norm", "ds_skipped", "zz/raw", "aa/raw", "actor/entropy"]
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0]),
)


def reference(raw: pl.DataFrame, table: AliasTable) -> pl.DataFrame:
    frame, _ = segments.resolve(coerce_raw(raw).with_columns(pl.col("key").cast(pl.Utf8)))
    resolved = table.resolve(frame["key"].unique(maintain_order=True).to_list())
    frame = frame.with_columns(
        pl.col("key").replace_strict(resolved, return_dtype=pl.Utf8).alias("metric"),
        pl.lit("r", dtype=pl.Utf8).alias("run"),
    ).sort("metric", "step", maintain_order=True)
    cumulative = [m for m, spec in table.specs.items() if spec.counter == "cumulative"]
    return normalise_counters(frame.select(list(SCHEMA)), cumulative)


def normalise_counters(frame: pl.DataFrame, cumulative: list[str]) -> pl.DataFrame:
    """Cumulative counters as per-step counts, the obvious way: a diff within each metric,
    a drop (a reset) or the first row keeps the value."""
    diff = pl.col("value").diff().over("metric")
    per_step = pl.when(diff.is_null() | (diff < 0)).then(pl.col("value")).otherwise(diff)
    return frame.with_columns(
        pl.when(pl.col("metric").is_in(cumulative))
        .then(per_step)
        .otherwise(pl.col("value"))
        .alias("value")
    )


@st.composite
def raw_frames(draw: st.DrawFn) -> pl.DataFrame:
    n_keys = draw(st.integers(1, len(POOL)))
    names = draw(st.permutations(POOL))[:n_keys]
    blocked = draw(st.booleans())
    rows: list[tuple[int, str, float]] = []
    per_key = {k: draw(st.lists(st.integers(-3, 30), min_size=1, max_size=12)) for k in names}
    if draw(st.booleans()):  # mostly increasing steps, as real logs are
        per_key = {k: sorted(s) for k, s in per_key.items()}
    if blocked:
        for k in names:
            rows += [(s, k, draw(VALUES)) for s in per_key[k]]
    else:
        longest = max(len(s) for s in per_key.values())
        for i in range(longest):
            rows += [(s[i], k, draw(VALUES)) for k, s in per_key.items() if i < len(s)]
    steps, ks, values = zip(*rows, strict=True)
    walls = draw(st.one_of(st.none(), st.just([float(i) for i in range(len(rows))])))
    frame = pl.DataFrame(
        {"step": list(steps), "key": list(ks), "value": list(values), "wall_time": walls},
        schema_overrides={"wall_time": pl.Float64},
    )
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, frame.height - 1)), max_size=3))))
    if cuts and frame.height > 1:  # chunks, as a parse in parallel or row groups leave them
        bounds = [0, *cuts, frame.height]
        frame = pl.concat(
            [frame.slice(a, b - a) for a, b in itertools.pairwise(bounds)], rechunk=False
        )
    coding = draw(st.sampled_from(["text", "enum", "categorical"]))
    if coding == "enum":  # with categories no row has (an empty column): they win no alias
        codes = keys.of(frame["key"])
        unused = [k for k in POOL if k not in codes.names]
        frame = frame.with_columns(keys.enum_keys(codes.per_row(), codes.names + unused))
    elif coding == "categorical":  # as the console reader keeps its records
        frame = frame.with_columns(pl.col("key").cast(pl.Categorical))
    return frame


@pytest.mark.parametrize("slices", [True, False], ids=["runs as slices", "row sort"])
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # set once per test
@given(raw=raw_frames())
def test_build_run_equals_reference(
    raw: pl.DataFrame, slices: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = AliasTable.default()
    monkeypatch.setattr(_grouped, "_sliceable", lambda n_runs, n_rows: slices)
    run = build_run(raw, name="r", source="r", fmt="t", attrs={"run_id": "r"})
    expected = reference(raw, table)
    assert run.frame.schema == pl.Schema(SCHEMA)
    assert_frame_equal(run.frame, expected, check_exact=True)  # NaN equals NaN, signs of inf kept
    assert set(run.mapping.values()) <= set(run.frame["key"].unique().to_list())
    assert_aligned(run.frame)


def assert_aligned(frame: pl.DataFrame) -> None:
    """The columns that hold a value a row (``run`` is one) are cut into the same chunks:
    polars would copy a misaligned frame on every later filter."""
    cut = {
        tuple(c.chunk_lengths())
        for c in frame.iter_columns()
        if c.name in ("step", "value", "key", "metric")
        or (c.name == "wall_time" and c.null_count() < c.len())
    }
    assert len(cut) <= 1, cut


def test_blocked_and_interleaved_give_one_frame() -> None:
    steps = np.arange(1000)
    names = [f"m{i}" for i in range(7)]
    values = np.random.default_rng(0).normal(size=(len(names), len(steps)))
    values[2, 10] = np.nan
    values[3, 20] = -np.inf
    blocked = pl.DataFrame(
        {
            "step": np.tile(steps, len(names)),
            "key": np.repeat(names, len(steps)),
            "value": values.ravel(),
        }
    )
    interleaved = blocked.sort("step", maintain_order=True)
    a = build_run(blocked, name="r", source="r", fmt="t").frame
    b = build_run(interleaved, name="r", source="r", fmt="t").frame
    assert a.equals(b)
    assert a["metric"].to_list() == sorted(a["metric"].to_list())


def test_a_restart_is_found_without_the_readers_help() -> None:
    raw = pl.DataFrame(
        {"step": [1, 2, 3, 2, 3], "key": ["loss"] * 5, "value": [1.0, 2.0, 3.0, 20.0, 30.0]}
    )
    run = build_run(raw, name="r", source="r", fmt="t")
    assert run.frame["value"].to_list() == [1.0, 20.0, 30.0]
    assert [e.kind for e in run.events] == ["restart"]


def test_text_keys_in_runs_and_enum_keys_give_the_same_codes() -> None:
    text = pl.Series(["b", "b", "a", "a", "b"])
    coded = keys.of(text)
    assert [coded.names[c] for c in coded.per_row()] == text.to_list()
    enum = keys.enum_keys(coded.per_row(), coded.names)
    again = keys.of(enum)
    assert [again.names[c] for c in again.per_row()] == text.to_list()
    interleaved = pl.Series(["a", "b", "c"] * 5)
    coded = keys.of(interleaved)
    assert [coded.names[c] for c in coded.per_row()] == interleaved.to_list()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["", "a", "loss", "x" * 20, "y" * 20]), st.integers(1, 12)),
        min_size=1,
        max_size=30,
    )
)
def test_text_key_codes_spell_the_column(runs: list[tuple[str, int]]) -> None:
    # runs of one key (run-length encoded) or keys changing on most rows (hashed)
    column = [key for key, length in runs for _ in range(length)]
    coded = keys.of(pl.Series(column))
    assert [coded.names[c] for c in coded.per_row()] == column
    assert coded.names == list(dict.fromkeys(column))


@st.composite
def wide_tables(draw: st.DrawFn) -> tabular.Wide:
    """Wide tables as the tabular readers validate them: any steps, empty cells (null),
    NaN/±inf, aliases that compete for a metric, a cumulative counter (empty at times), a
    key spelled like an unpivot column or empty (a pandas index), wall times present, absent,
    or only beside empty cells."""
    n = draw(st.integers(1, 12))
    step_list = draw(st.lists(st.integers(-3, 40), min_size=n, max_size=n))
    if draw(st.sampled_from([True, True, True, False])):  # mostly strictly increasing
        step_list = sorted(set(step_list))
        n = len(step_list)
    names = draw(st.permutations([*POOL, "zz/other"]))[: draw(st.integers(1, 8))]
    if draw(st.sampled_from([False, False, False, True])):  # named like an unpivot column
        names.append(draw(st.sampled_from(["step", "wall_time", "key", "value", "metric", ""])))
    cells = st.one_of(st.none(), VALUES)
    columns = [
        pl.Series(
            name,
            [None] * n
            if draw(st.integers(0, 5)) == 0
            else draw(st.lists(cells, min_size=n, max_size=n)),
            dtype=pl.Float64,
        )
        for name in names
    ]
    wall = draw(st.sampled_from(["none", "all", "some"]))
    walls = (
        None
        if wall == "none"
        else pl.Series(
            "wall_time",
            [float(i) if wall == "all" or i % 2 else None for i in range(n)],
            dtype=pl.Float64,
        )
    )
    return tabular.Wide(pl.Series("step", step_list, dtype=pl.Int64), walls, columns)


@settings(max_examples=300, deadline=None)
@given(table=wide_tables(), by_key=st.booleans())
def test_a_wide_table_builds_the_run_its_raw_frame_builds(
    table: tabular.Wide, by_key: bool
) -> None:
    """Straight into the canonical frame, in a chunk per key (the table's own buffers) or,
    for a table of many keys (forced here), unpivoted by polars."""
    monotonic = bool(np.all(np.diff(table.step.to_numpy()) > 0))
    common = {"name": "r", "source": "r", "fmt": "t", "attrs": {"run_id": "r"}}
    before = pl.DataFrame([pl.Series(c.name, c.to_list(), dtype=c.dtype) for c in table.columns])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wide, "_KEY_CHUNKS", wide._KEY_CHUNKS if by_key else 0)
        direct = wide.build_table(table, monotonic=monotonic, **common)  # type: ignore[arg-type]
    # the frame shares the table's buffers: building it changes none (a counter's per-step
    # counts once did, in place)
    assert_frame_equal(pl.DataFrame(table.columns), before, check_exact=True)
    via_raw = build_run(table.raw(), monotonic=monotonic, **common)  # type: ignore[arg-type]
    assert_frame_equal(direct.frame, via_raw.frame, check_exact=True)
    assert direct.mapping == via_raw.mapping and direct.attrs == via_raw.attrs
    assert_aligned(direct.frame)


def test_parts_with_wall_times_in_some_parts_only_are_aligned() -> None:
    """Found by the parts property test: a wall time beside one key's values only, so one
    part's frame has wall times and the others none; put together, the wall-time column was
    cut otherwise than the rest (every later filter would copy the frame)."""
    table = tabular.Wide(
        pl.Series("step", [-1, 0, 1]),
        pl.Series("wall_time", [None, 1.0, None], dtype=pl.Float64),
        [
            pl.Series("loss", [None, None, 0.0], dtype=pl.Float64),
            pl.Series("grad_norm", [1.0, None, None], dtype=pl.Float64),
            pl.Series("actor/grad_norm", [None, 0.0, None], dtype=pl.Float64),
        ],
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wide, "_PARALLEL_CELLS", 0)
        patch.setattr(wide, "_PART_COLUMNS", 1)
        patch.setattr(wide, "_KEY_CHUNKS", 0)
        patch.setattr(pl, "thread_pool_size", lambda: 3)
        run = wide.build_table(table, name="r", source="r", fmt="t", monotonic=True)
    assert_aligned(run.frame)
    via_raw = build_run(table.raw(), name="r", source="r", fmt="t", monotonic=True)
    assert_frame_equal(run.frame, via_raw.frame, check_exact=True)


def test_a_wide_table_of_few_keys_is_its_own_columns_a_chunk_per_key() -> None:
    """The frame's values are the table's columns, not copies (a column with empty cells is
    filtered, a counter differenced); only the names are written."""
    steps = pl.Series("step", np.arange(1, 101))
    columns = [pl.Series(name, np.linspace(0.0, 1.0, 100)) for name in ("b", "actor/grad_norm")]
    columns.append(pl.Series("a", [None if i % 3 else float(i) for i in range(100)]))
    table = tabular.Wide(steps, None, columns)
    frame = wide.build_table(table, name="r", source="r", fmt="t", monotonic=True).frame
    assert [c.chunk_lengths() for c in (frame["step"], frame["key"], frame["value"])] == [
        [34, 100, 100]
    ] * 3  # metric order: a, b, grad_norm (actor/grad_norm renamed)
    assert frame["metric"].chunk_lengths() == [34, 100, 100]

    def address(series: pl.Series) -> int:
        return int(series.to_numpy().ctypes.data)  # zero-copy for one chunk without nulls

    chunks = frame["value"].get_chunks()
    assert address(chunks[1]) == address(columns[0]) and address(chunks[2]) == address(columns[1])
    assert address(frame["step"].get_chunks()[1]) == address(steps)


@settings(max_examples=150, deadline=None)
@given(table=wide_tables(), workers=st.integers(2, 4))
def test_a_wide_table_unpivoted_in_parts_side_by_side_builds_the_same_run(
    table: tabular.Wide, workers: int
) -> None:
    """A big table of many keys is unpivoted in parts of its columns, in threads: the same
    frame, in a chunk per part (forced here on small tables: one column a part, up to four
    parts, and no table counted small enough for a chunk per key)."""
    monotonic = bool(np.all(np.diff(table.step.to_numpy()) > 0))
    common = {"name": "r", "source": "r", "fmt": "t", "attrs": {"run_id": "r"}}
    whole = wide.build_table(table, monotonic=monotonic, **common)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wide, "_PARALLEL_CELLS", 0)
        patch.setattr(wide, "_PART_COLUMNS", 1)
        patch.setattr(wide, "_KEY_CHUNKS", 0)  # unpivoted: a table of many keys
        patch.setattr(pl, "thread_pool_size", lambda: workers)
        parts = wide.build_table(table, monotonic=monotonic, **common)  # type: ignore[arg-type]
    assert_frame_equal(parts.frame, whole.frame, check_exact=True)
    assert parts.mapping == whole.mapping and parts.attrs == whole.attrs
    assert_aligned(parts.frame)


@settings(max_examples=150, deadline=None)
@given(table=wide_tables(), workers=st.integers(2, 4), by_key=st.booleans())
def test_a_wide_table_read_and_unpivoted_in_parts_builds_the_same_run(
    table: tabular.Wide, workers: int, by_key: bool
) -> None:
    """A big single-row-group Parquet file is read and built in parts of its columns, a part
    per thread (in chunks per key, or unpivoted for a table of many keys): the same Run as the
    whole table built at once, or None (the caller then builds the whole table) exactly when
    the straight route cannot take it."""
    monotonic = bool(np.all(np.diff(table.step.to_numpy()) > 0))
    common = {"name": "r", "source": "r", "fmt": "t", "attrs": {"run_id": "r"}}
    whole = wide.build_table(table, monotonic=monotonic, **common)  # type: ignore[arg-type]
    named = {c.name: c for c in table.columns}
    asked: list[list[str]] = []

    def read_part(part: list[str]) -> tabular.Wide | None:
        asked.append(part)
        return tabular.Wide(table.step, table.wall, [named[k] for k in part]) if monotonic else None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wide, "_PART_COLUMNS", 1)
        patch.setattr(wide, "_KEY_CHUNKS", wide._KEY_CHUNKS if by_key else 0)
        patch.setattr(pl, "thread_pool_size", lambda: workers)
        parts = wide.build_wide_parts(read_part, list(named), **common)  # type: ignore[arg-type]
    resolved = AliasTable.default().resolve(list(named))
    metrics = [resolved.get(k, k) for k in named]
    straight = (
        monotonic
        and all(c.null_count() < c.len() for c in table.columns)
        and len(set(metrics)) == len(metrics)
        and not (set(named) | set(metrics)) & wide._UNPIVOT_NAMES
    )
    assert (parts is not None) == straight
    if parts is not None:
        assert_frame_equal(parts.frame, whole.frame, check_exact=True)
        assert parts.mapping == whole.mapping and parts.attrs == whole.attrs
        assert_aligned(parts.frame)
        assert sorted(k for part in asked for k in part) == sorted(named)
        assert len(asked) == min(workers, len(named))


@pytest.mark.parametrize(
    "names",
    [["aa/raw", "zz/raw"], ["actor/grad_norm", "loss", "zz/raw"]],
    ids=["no alias: metric is the key column", "an alias renames a key"],
)
def test_text_keys_already_in_metric_order_keep_their_column(names: list[str]) -> None:
    n = 100  # long runs: cut into slices, not sorted row by row
    raw = pl.DataFrame(
        {
            "step": list(range(n)) * len(names),
            "key": [k for k in names for _ in range(n)],
            "value": [float(i) for i in range(n * len(names))],
        }
    )
    run = build_run(raw, name="r", source="r", fmt="t", attrs={"run_id": "r"})
    assert_frame_equal(run.frame, reference(raw, AliasTable.default()), check_exact=True)


@pytest.mark.parametrize(
    "names",
    [
        ["value", "loss"],
        ["key", "loss"],
        ["metric", "train/loss"],
        ["", "loss"],
        ["skipped_total", "loss"],
    ],
    ids=["value", "key", "metric", "empty name", "empty counter"],
)
def test_wide_tables_named_like_unpivot_columns_or_with_an_empty_counter(names: list[str]) -> None:
    # found in review: polars' unpivot refuses these names, and renames an empty one; a
    # cumulative counter without rows crashed build_run
    columns = [
        pl.Series(
            names[0], [None, None] if names[0] == "skipped_total" else [1.0, 2.0], dtype=pl.Float64
        ),
        pl.Series(names[1], [3.0, 4.0]),
    ]
    table = tabular.Wide(pl.Series("step", [1, 2]), None, columns)
    direct = wide.build_table(table, name="r", source="r", fmt="t", monotonic=True)
    assert sorted(direct.frame["key"].unique().to_list()) == sorted(
        n for n, c in zip(names, columns, strict=True) if c.null_count() < c.len()
    )
    via_raw = build_run(table.raw(), name="r", source="r", fmt="t", monotonic=True)
    assert_frame_equal(direct.frame, via_raw.frame, check_exact=True)
