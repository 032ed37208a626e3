"""Tables of numbers under a header row (``|``, tabs, aligned blanks), rows pasted without
their header, and rows whose columns no header names."""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pytest

from proxydiag.errors import IngestWarning
from proxydiag.ingest import console


def _points(path: Path, **kw: int) -> dict[str, list[tuple[int, float]]]:
    raw = console.parse(path, **kw).raw
    return {
        str(k): [
            (int(s), float(v))
            for s, v in raw.filter(pl.col("key") == k).select("step", "value").rows()
        ]
        for k in sorted(raw["key"].cast(pl.Utf8).unique().to_list())
    }


@pytest.mark.parametrize("sep", [" | ", "\t", "   "])
def test_a_table_is_read_whatever_its_separator(tmp_path: Path, sep: str) -> None:
    header = sep.join(["global_step", "loss", "grad norm" if sep != "   " else "grad_norm"])
    rows = [sep.join([str(s), f"{2 - s / 100:.4f}", f"{s / 1000:.3f}"]) for s in (10, 20, 30)]
    path = tmp_path / "t.log"
    path.write_text("\n".join(["launching", header, *rows, "done"]) + "\n")
    got = _points(path)
    norm = "grad norm" if sep != "   " else "grad_norm"
    assert got == {
        "loss": [(10, 1.9), (20, 1.8), (30, 1.7)],
        norm: [(10, 0.01), (20, 0.02), (30, 0.03)],
    }


def test_rows_without_a_header_are_reported_once_as_columns_unnamed(tmp_path: Path) -> None:
    path = tmp_path / "rows.log"
    path.write_text(
        "pasted from the middle:\n  310  1.52  0.41\n  320  1.50  0.40\n  330  1.49  0.44\n"
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        raw = console.parse(path).raw
    said = [str(w.message) for w in seen if issubclass(w.category, IngestWarning)]
    unnamed = [m for m in said if "columns unnamed" in m]
    assert len(unnamed) == 1 and f"{path}:2:" in unnamed[0] and "3 rows of 3 numbers" in unnamed[0]
    assert raw.is_empty()


def test_a_lone_line_of_numbers_is_no_table(tmp_path: Path) -> None:
    path = tmp_path / "lone.log"
    path.write_text("step 1 loss 2.0\n0 1 2 3 4 5 6 7\nstep 2 loss 1.9\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = _points(path)
    assert not [w for w in seen if "columns unnamed" in str(w.message)]
    assert got == {"loss": [(1, 2.0), (2, 1.9)]}


def test_rows_need_an_integer_counter_to_borrow_an_earlier_header(tmp_path: Path) -> None:
    """A header of as many columns without a counter column names no later rows."""
    path = tmp_path / "t.log"
    path.write_text("loss | lr\n1.5 | 0.001\n1.4 | 0.001\nnoise line\n1.3 | 0.002\n1.2 | 0.002\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = _points(path)
    assert any("columns unnamed" in str(w.message) for w in seen)
    # the first table has no step column: its rows count in order (no step anywhere)
    assert got == {"loss": [(1, 1.5), (2, 1.4)], "lr": [(1, 0.001), (2, 0.001)]}


def test_a_table_across_blocks_reads_as_one(tmp_path: Path) -> None:
    lines = ["step | loss | lr", "-----|------|---"]
    lines += [f"{s} | {1 + 1 / s:.6f} | 0.0001" for s in range(1, 400)]
    path = tmp_path / "long.log"
    path.write_text("\n".join(lines) + "\n")
    whole = _points(path)
    assert len(whole["loss"]) == 399 and whole["loss"][0] == (1, 2.0)
    assert _points(path, chunk_bytes=1024) == whole


def test_words_over_columns_of_numbers_are_no_header_without_a_counter(tmp_path: Path) -> None:
    path = tmp_path / "prose.log"
    path.write_text("noise line\n1.3  0.002\n1.2  0.002\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        raw = console.parse(path).raw
    assert raw.is_empty()
    assert any("columns unnamed" in str(w.message) for w in seen)
