"""The benchmark's bulk event-file writer, checked against TensorBoard's own loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.tb_bulk_writer import write_scalars
from proxydiag import read_run
from tests._tb_files import assert_same_rows, loader_rows


@pytest.mark.parametrize("form", ["simple", "tensor_f32", "tensor_f64"])
@pytest.mark.parametrize("metadata", ["every", "first"])
def test_bulk_writer_matches_event_file_loader(tmp_path: Path, form: str, metadata: str) -> None:
    steps = np.array([1, 2, 127, 128, 20_000, 2**40, 3])
    tags = ["loss", "actor/grad_norm", "ü tag"]
    values = np.random.default_rng(3).normal(size=(steps.size, len(tags)))
    values[1, 1], values[2, 0], values[3, 2] = np.nan, np.inf, -np.inf
    wall = 1.7e9 + np.arange(steps.size) * 0.25
    path = write_scalars(
        tmp_path / "events.out.tfevents.bulk",
        tags=tags,
        steps=steps,
        values=values,
        wall_times=wall,
        form=form,
        metadata=metadata,  # type: ignore[arg-type]
    )
    cast = np.float64 if form == "tensor_f64" else np.float32
    expected = [
        (tag, int(step), float(cast(values[i, j])), float(wall[i]))
        for i, step in enumerate(steps)
        for j, tag in enumerate(tags)
    ]
    assert_same_rows(loader_rows(path), expected)
    run = read_run(path)  # and through proxydiag (step 3 after 2**40: a restart)
    assert run.series("loss")[0].tolist() == [1, 2, 3]
