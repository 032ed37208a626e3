"""JSONL reader: flat records, veRL's file logger, NaN tokens, null, cut lines, fuzzing."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import read_run

NAN, INF = float("nan"), float("inf")


def rows(path: Path) -> list[tuple[int, str, float]]:
    return read_run(path).frame.sort("key", "step").select("step", "key", "value").rows()


def same(a: list[tuple[int, str, float]], b: list[tuple[int, str, float]]) -> bool:
    return len(a) == len(b) and all(
        x[:2] == y[:2] and (x[2] == y[2] or (math.isnan(x[2]) and math.isnan(y[2])))
        for x, y in zip(a, b, strict=True)
    )


def test_verl_file_logger_null_is_nan_and_noted(tmp_path: Path) -> None:
    path = tmp_path / "exp.jsonl"
    path.write_text(
        '{"step": 1, "data": {"actor/pg_loss": 0.5, "actor/grad_norm": null}}\n'
        '{"step": 2, "data": {"actor/pg_loss": -0.25, "training/rollout_probs_diff_mean": 0.01}}\n'
    )
    run = read_run(path)
    assert same(
        run.frame.sort("key", "step").select("step", "key", "value").rows(),
        [
            (1, "actor/grad_norm", NAN),
            (1, "actor/pg_loss", 0.5),
            (2, "actor/pg_loss", -0.25),
            (2, "training/rollout_probs_diff_mean", 0.01),
        ],
    )
    assert run.attrs["framework"] == "verl" and run.attrs["null_as_nan"] == 1
    assert "sign of an infinity was lost" in run.attrs["notes"][0]
    assert run.mapping["mismatch_prob_diff"] == "training/rollout_probs_diff_mean"


def test_python_json_tokens_nested_keys_and_absent_keys(tmp_path: Path) -> None:
    path = tmp_path / "flat.jsonl"
    lines = [
        {"step": 1, "loss": NAN, "gn": INF},
        {"step": 2, "loss": -INF, "x": {"y": 1e308}},
        {"step": 3, "gn": -1e308},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert same(
        rows(path),
        [(1, "gn", INF), (3, "gn", -1e308), (1, "loss", NAN), (2, "loss", -INF), (2, "x/y", 1e308)],
    )
    assert "null_as_nan" not in read_run(path).attrs


def test_a_token_inside_a_string_takes_the_exact_path(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"step": 1, "loss": 1.5, "note": "a:NaN}"}\n{"step": 2, "loss": NaN}\n')
    run = read_run(path)
    assert same(rows(path), [(1, "loss", 1.5), (2, "loss", NAN)])
    assert run.attrs["ignored_columns"] == ["note"]


def test_cut_last_line_warns_and_keeps_the_intact_lines(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text('{"step": 1, "loss": 1.5}\n{"step": 2, "loss": 2.5}\n{"step": 3, "lo')
    with pytest.warns(IngestWarning, match=r"cut.jsonl:3: the last line is cut"):
        assert rows(path) == [(1, "loss", 1.5), (2, "loss", 2.5)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"step": 1, "loss": 1.5}\n{"step": 2, "loss": 2.5\n{"step": 3}\n', ":2: not valid JSON"),
        (
            '{"step": 1, "loss": "1.5"}\n{"step": 2, "loss": "abc"}\n',
            ":2: 'abc' is not a number in column loss",
        ),
        (
            '{"step": 99999999999999999999, "loss": 1.5}\n',
            ":1: step 99999999999999999999 does not fit",
        ),
        ('{"loss": 1.5}\n', ":1: no step column"),
        ('{"step": 1, "loss": 1}\n{"loss": 2}\n', ":2: no step in column step"),
        ("", ": empty file"),
    ],
)
def test_bad_jsonl_is_one_line_naming_the_place(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(IngestError) as info:
        read_run(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)


def test_sentinel_value_in_data_is_read_exactly(tmp_path: Path) -> None:
    """A value equal to an internal sentinel must not turn into NaN."""
    path = tmp_path / "x.jsonl"
    path.write_text('{"step": 1, "a": -1.2345678987654321e-307, "b": NaN}\n')
    assert same(rows(path), [(1, "a", -1.2345678987654321e-307), (1, "b", NAN)])


value = st.one_of(st.floats(width=64), st.integers(-(2**53), 2**53), st.none())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records=st.lists(
        st.dictionaries(st.sampled_from(["a", "b/c", "d e", "ü"]), value, max_size=4),
        min_size=1,
        max_size=20,
    ),
    verl=st.booleans(),
)
def test_random_records_round_trip_exactly(
    tmp_path: Path, records: list[dict[str, float | None]], verl: bool
) -> None:
    path = tmp_path / "h.jsonl"
    lines = [{"step": i, "data": r} if verl else {"step": i, **r} for i, r in enumerate(records)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    want = sorted(
        (
            (i, k, NAN if v is None else float(v))
            for i, r in enumerate(records)
            for k, v in r.items()
        ),
        key=lambda t: (t[1], t[0]),
    )
    if not want:
        with pytest.raises(IngestError, match="no metric values"):
            read_run(path)
        return
    assert same(rows(path), want)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(max_size=200),
    prefix=st.sampled_from([b"", b'{"step": 1, "a": 1}\n', b'{"step": 1, "data": {']),
)
def test_garbage_raises_only_ingest_error(tmp_path: Path, data: bytes, prefix: bytes) -> None:
    path = tmp_path / "g.jsonl"
    path.write_bytes(prefix + data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        try:
            read_run(path)
        except IngestError as exc:
            assert "\n" not in str(exc)


def test_null_told_apart_from_absent_keys(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text(
        '{"step":1,"data":{"a":null}}\n{"step":2,"data":{"b":1}}\n'
        '{"step":3,"data":{"a":2,"b":null}}\n'
    )
    assert same(rows(path), [(1, "a", NAN), (3, "a", 2.0), (2, "b", 1.0), (3, "b", NAN)])
    assert read_run(path).attrs["null_as_nan"] == 2
    twin = tmp_path / "twin.jsonl"  # the same leaf name under two parents: no guessing
    twin.write_text('{"step": 1, "x": {"loss": null}}\n{"step": 2, "y": {"loss": null}}\n')
    assert same(rows(twin), [(1, "x/loss", NAN), (2, "y/loss", NAN)])
