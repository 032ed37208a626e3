"""TensorBoard reader: real writers in, TensorBoard's own EventFileLoader as the oracle."""

from __future__ import annotations

import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tensorboardX import SummaryWriter

from proxydiag import read_run, read_runs
from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import tensorboard
from proxydiag.ingest.tensorboard._scalars import read_buffer
from tests._tb_files import assert_same_rows, event_file, loader_rows, write_tensor_events

SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-45, 3.4e38, 1e300]


def _ours(path: Path) -> list[tuple[str, int, float, float]]:
    sc = read_buffer(np.fromfile(path, dtype=np.uint8), path=str(path))
    assert not sc.issues
    return list(
        zip(
            sc.keys.to_list(),
            sc.steps.tolist(),
            sc.values.tolist(),
            sc.wall_times.tolist(),
            strict=True,
        )
    )


def _random_rows(seed: int, n: int = 300) -> list[tuple[str, int, float, float]]:
    rng = np.random.default_rng(seed)
    tags = ["loss", "actor/grad_norm", "train/ü tag", "a" * 200, "x/y z<>&"]
    rows = []
    for i in range(n):
        number = (
            float(rng.choice(SPECIALS))
            if rng.random() < 0.1
            else float(rng.normal() * 10.0 ** int(rng.integers(-8, 8)))
        )
        step = int(rng.choice([i, i, i, -5, 2**40 + i]))
        rows.append((str(rng.choice(tags)), step, number, 1.7e9 + float(rng.random()) * 1e3))
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simple_value_matches_event_file_loader(tmp_path: Path, seed: int) -> None:
    writer = SummaryWriter(str(tmp_path))
    for tag, step, number, wall in _random_rows(seed):
        writer.add_scalar(tag, number, step, walltime=wall)
    writer.add_histogram("hist", np.arange(10.0), 3)
    writer.add_text("note", "hello", 3)
    writer.add_image("img", np.zeros((3, 4, 4)), 3)
    writer.close()
    path = event_file(tmp_path)
    expected = loader_rows(path)
    assert len(expected) == 300
    assert_same_rows(_ours(path), expected)


@pytest.mark.parametrize(
    ("dtype", "first_only"),
    [
        ("float", False),
        ("float", True),
        ("double", False),
        ("double", True),
        ("float16", False),
        ("int64", True),
    ],
)
def test_tensor_scalars_match_event_file_loader(
    tmp_path: Path, dtype: str, first_only: bool
) -> None:
    rows = _random_rows(7, n=120)
    if dtype == "int64":
        rows = [(t, s, float(i * 3 - 50), w) for i, (t, s, _, w) in enumerate(rows)]
    logdir = write_tensor_events(tmp_path, rows, dtype=dtype, first_only=first_only)
    path = event_file(logdir)
    expected = loader_rows(path)
    assert len(expected) == 120
    got = _ours(path)
    assert_same_rows(got, expected)
    if dtype == "double":  # DT_DOUBLE keeps float64: exactly what was logged
        finite = [(g[2], r[2]) for g, r in zip(got, rows, strict=True) if math.isfinite(r[2])]
        assert all(a == b for a, b in finite)


def test_run_from_directory_of_several_files(tmp_path: Path) -> None:
    run_dir = tmp_path / "exp-7"
    write_tensor_events(
        run_dir,
        [("loss", s, s / 10, 1000.0 + s) for s in range(3)],
        dtype="double",
        first_only=True,
    )
    later = SummaryWriter(str(run_dir / "tmp"))
    for s in range(3, 6):
        later.add_scalar("loss", s / 10, s, walltime=2000.0 + s)
    later.close()
    event_file(run_dir / "tmp").rename(
        run_dir / "events.out.tfevents.0000.a"
    )  # sorts first by name
    (run_dir / "tmp").rmdir()
    assert tensorboard.can_read(run_dir)
    run = read_run(run_dir)
    assert run.name == "exp-7"
    assert run.attrs["format"] == "tensorboard"
    steps, values = run.series("loss")
    assert steps.tolist() == [0, 1, 2, 3, 4, 5]
    assert values[:3].tolist() == [0.0, 0.1, 0.2]
    assert values[3:].tolist() == [float(np.float32(v)) for v in (0.3, 0.4, 0.5)]
    assert run.frame["wall_time"].to_list() == [1000.0, 1001.0, 1002.0, 2003.0, 2004.0, 2005.0]
    assert run.attrs["event_files"][-1] == "events.out.tfevents.0000.a"  # first wall time decides
    assert run.frame["step"].dtype == pl.Int64


def test_per_tag_subdirectories_are_runs(tmp_path: Path) -> None:
    for sub, base in (("train_inner", 1.0), ("valid", 2.0)):
        writer = SummaryWriter(str(tmp_path / "ckpt" / sub))
        for s in range(4):
            writer.add_scalar("loss", base + s, s)
        writer.close()
    runs = read_runs(tmp_path / "ckpt")
    assert sorted(r.name for r in runs) == ["train_inner", "valid"]
    valid = next(r for r in runs if r.name == "valid")
    assert valid.series("loss")[1].tolist() == [2.0, 3.0, 4.0, 5.0]


def test_restart_later_segment_wins(tmp_path: Path) -> None:
    writer = SummaryWriter(str(tmp_path))
    for s, v in [(0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0), (2, 30.0), (3, 40.0), (4, 50.0)]:
        writer.add_scalar("loss", v, s)
    writer.close()
    run = read_run(tmp_path)
    assert run.series("loss")[1].tolist() == [1.0, 2.0, 30.0, 40.0, 50.0]
    assert [(e.kind, e.onset_step) for e in run.events] == [("restart", 2)]


def _file_with(tmp_path: Path, n: int) -> Path:
    writer = SummaryWriter(str(tmp_path))
    for s in range(n):
        writer.add_scalar("loss", float(s), s)
    writer.close()
    return event_file(tmp_path)


def _record_offsets(path: Path) -> list[int]:
    data, offsets, pos = path.read_bytes(), [], 0
    while pos < len(data):
        offsets.append(pos)
        pos += 16 + int.from_bytes(data[pos : pos + 8], "little")
    return offsets


def test_truncated_last_record_reads_up_to_damage(tmp_path: Path) -> None:
    path = _file_with(tmp_path, 10)
    last = _record_offsets(path)[-1]
    path.write_bytes(path.read_bytes()[: last + 20])
    with pytest.warns(IngestWarning, match=rf"{path.name}@{last}: file ends inside a record"):
        run = read_run(path)
    assert run.series("loss")[1].tolist() == [float(s) for s in range(9)]
    assert any(e.kind == "truncated" for e in run.events)


def test_flipped_crc_byte_skips_that_record(tmp_path: Path) -> None:
    path = _file_with(tmp_path, 10)
    at = _record_offsets(path)[4]  # record 0 is the file_version event: this is step 3
    data = bytearray(path.read_bytes())
    data[at + 14] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.warns(IngestWarning, match=rf"{path.name}@{at}: CRC mismatch"):
        run = read_run(path)
    assert run.series("loss")[0].tolist() == [0, 1, 2, 4, 5, 6, 7, 8, 9]


def test_garbage_between_records_and_broken_length(tmp_path: Path) -> None:
    path = _file_with(tmp_path, 6)
    offs = _record_offsets(path)
    data = path.read_bytes()
    broken_len = bytearray(data[offs[5] : offs[6]])
    broken_len[2] ^= 0x01  # the length header itself is corrupt
    damaged = (
        data[: offs[2]]
        + b"\x00garbage!" * 3
        + data[offs[2] : offs[5]]
        + bytes(broken_len)
        + data[offs[6] :]
    )
    path.write_bytes(damaged)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = read_run(path)
    messages = [str(w.message) for w in caught if issubclass(w.category, IngestWarning)]
    assert messages[0] == (
        f"{path}@{offs[2]}: corrupt record header or garbage (27 bytes); "
        f"skipped to the next intact record at {path}@{offs[2] + 27}"
    )
    assert "corrupt record header" in messages[1]
    assert run.series("loss")[0].tolist() == [0, 1, 2, 3, 5]


def test_zero_length_file_and_empty_directory(tmp_path: Path) -> None:
    empty = tmp_path / "events.out.tfevents.1.host"
    empty.write_bytes(b"")
    assert tensorboard.can_read(empty)
    with (
        pytest.warns(IngestWarning, match="no scalar points"),
        pytest.raises(IngestError, match="no runs found"),
    ):
        read_runs(empty)
    with (
        pytest.warns(IngestWarning),
        pytest.raises(IngestError, match=rf"^{tmp_path}: no scalar points in its event files"),
    ):
        tensorboard.read(tmp_path, tensorboard.ReadContext())


def test_detection_by_content(tmp_path: Path) -> None:
    path = _file_with(tmp_path, 3)
    renamed = tmp_path / "metrics.bin"
    shutil.copy(path, renamed)
    assert tensorboard.can_read(renamed)
    text = tmp_path / "log.txt"
    text.write_text("iteration 1 | lm loss: 2.0\n")
    assert not tensorboard.can_read(text)
    assert not tensorboard.can_read(tmp_path / "missing")
    assert read_run(renamed).series("loss")[1].tolist() == [0.0, 1.0, 2.0]


def test_jit_without_writable_cache_compiles_uncached(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    from proxydiag.ingest.tensorboard import _jit as tb_jit

    real = numba.njit

    def no_cache_dir(*args: object, **kwargs: object) -> object:
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'f.py'")
        return real(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", no_cache_dir)
    add_one = tb_jit.jit(lambda x: x + 1)
    assert add_one(2) == 3
