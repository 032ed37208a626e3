"""Trainer console styles read exactly (tests/data/console/styles/README.md): each fixture,
written in the shape of one trainer's output, gives exactly the points its expected file lists.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import polars as pl
import pytest

from proxydiag.ingest import console

STYLES = Path(__file__).resolve().parents[2] / "data" / "console" / "styles"
FIXTURES = sorted(STYLES.glob("*.expected.json"))


def _value(v: float | str) -> float:
    return float(v)


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def test_there_are_at_least_25_styles() -> None:
    assert len(FIXTURES) >= 25, [f.name for f in FIXTURES]


@pytest.mark.parametrize("expected", FIXTURES, ids=lambda p: p.name.split(".")[0])
def test_a_style_is_read_exactly(expected: Path) -> None:
    spec = json.loads(expected.read_text(encoding="utf-8"))
    log = expected.with_name(expected.name.replace(".expected.json", ".log"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = console.parse(log)
    raw = parsed.raw.sort("step", maintain_order=True)
    got: dict[str, list[tuple[int, float]]] = {}
    for key in raw["key"].unique(maintain_order=True).to_list():
        rows = raw.filter(pl.col("key") == key).select("step", "value").rows()
        got[str(key)] = [(int(s), float(v)) for s, v in rows]
    want = {key: [(int(s), _value(v)) for s, v in pts] for key, pts in spec["points"].items()}
    assert sorted(got) == sorted(want), f"keys differ: {sorted(set(got) ^ set(want))}"
    # and the file is recognised as a console log on its own (first MB sniffed)
    assert console.can_read(log)
    for key, pts in want.items():
        have = got[key]
        assert len(have) == len(pts), (key, have, pts)
        for (s1, v1), (s2, v2) in zip(have, pts, strict=True):
            assert s1 == s2 and _same(v1, v2), (key, have, pts)
