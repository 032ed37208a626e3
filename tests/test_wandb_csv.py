"""W&B UI history CSV exports: several runs per file, band columns skipped."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from proxydiag import read_runs
from proxydiag.errors import IngestError
from proxydiag.ingest import detect, wandb_csv

EXPORT = (
    '"Step","full - seed 1 - actor/grad_norm","full - seed 1 - actor/grad_norm__MIN",'
    '"full - seed 1 - actor/grad_norm__MAX","proxy-25 - actor/grad_norm","proxy-25 - critic/score/mean"\n'
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
    with pytest.raises(IngestError, match=rf"^{path}:3: 'abc' is not a number in column loss"):
        read_runs(path)


def test_plain_csv_is_not_an_export(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n0,1.0\n")
    assert not wandb_csv.can_read(path)
