"""A console log tailed while it grows reads as the whole file: whatever bytes each poll
finds, every point lands at the step the offline reader gives it (on every console file the
tests have: the trainer-style fixtures, the real TRL runs, the sample runs, the real public
logs), a restart from a checkpoint taken as the watcher takes it. The dialects' state runs
from chunk to chunk (the HF Trainer's running index of its log lines is how a dict after a
tqdm bar gets its step), and a chunk's lines keep their numbers in the file."""

from __future__ import annotations

import math
import random
import warnings
from pathlib import Path

import pytest

from proxydiag.errors import NoPointsError, ProxydiagError
from proxydiag.ingest import read_run
from proxydiag.ingest.tail import open_tail
from proxydiag.run.rows import steps_of
from tests._paths import SAMPLES, TESTS
from tests.conftest import realruns_dir

#: dialects whose overflow lines take the step of the next step report, and whose overflow
#: counting is decided on the whole file: a chunk that ends between an overflow and its
#: report dates it otherwise (a known limit of the live tail, docs/watch.md)
_WHOLE_FILE = {"deepspeed", "dschat"}
#: files read in order only (no step anywhere): a tail, joining mid-file, drops their
#: step-less lines by design (a chunk cannot know how many lines came before a restart)
_ORDER_ONLY = "the order of the metric lines"


def _files() -> list[Path]:
    found = sorted((TESTS / "data" / "console").rglob("*.log"))
    found += sorted((TESTS / "data" / "real").rglob("console.log"))
    found += sorted(SAMPLES.rglob("*.log"))
    real = realruns_dir()
    if real.is_dir():
        found += sorted(p for p in real.rglob("*") if p.suffix in {".log", ".out", ".txt"})
    return found


def _points(rows: list[tuple[int, dict[str, float]]]) -> dict[tuple[int, str], float]:
    return {(s, k): v for s, m in rows for k, v in m.items()}


def _take(got: dict[tuple[int, str], float], rows: list[tuple[int, dict[str, float]]]) -> None:
    """Rows into ``got`` as a watcher takes them: a step a key already holds (or passed) is a
    restart from a checkpoint, and the points at and after it are forgotten."""
    for step, metrics in rows:
        if any(s >= step for s, k in got if k in metrics):
            for key in [key for key in got if key[0] >= step]:
                del got[key]
        got.update({(step, k): v for k, v in metrics.items()})


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("path", _files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_console_log_tailed_in_random_chunks_reads_as_the_whole_file(
    path: Path, tmp_path: Path
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            whole = read_run(path, fmt="console")
        except (NoPointsError, ProxydiagError):
            pytest.skip("not a console log the reader takes")
        if _ORDER_ONLY in whole.attrs.get("step_source", []):
            pytest.skip("steps by line order only")
        if _WHOLE_FILE & set(whole.attrs.get("console_dialects", [])):
            pytest.skip("overflow lines dated by the next step report")
        expected = _points(list(steps_of(whole)))
        data = path.read_bytes()
        small = len(data) < 100_000
        for seed in range(3 if small else 1):
            rng = random.Random(seed)
            grown = tmp_path / f"s{seed}" / path.name
            grown.parent.mkdir()
            grown.write_bytes(b"")
            tail = open_tail(grown)
            got: dict[tuple[int, str], float] = {}
            at = 0
            while at < len(data):
                # 3-25 polls (3-6 on a large file), cut anywhere (mid-line too)
                least = len(data) // (25 if small else 6) + 1
                at = min(len(data), at + rng.randint(least, len(data) // 3 + 2))
                grown.write_bytes(data[:at])
                _take(got, tail.poll())
            _take(got, tail.poll())
            assert set(got) == set(expected), (seed, sorted(set(got) ^ set(expected))[:6])
            bad = [k for k in expected if not _same(got[k], expected[k])]
            assert not bad, (seed, bad[:6])


def test_a_chunk_that_starts_with_overflows_dates_them_by_the_report_before(
    tmp_path: Path,
) -> None:
    """DeepSpeed's overflow lines take the step of the next ``step=`` report; a tick that
    ends before that report dates them by the one before (a step early), never by a record
    order of the chunk's own (step 1: a restart to the watcher, which would forget the run)."""
    log = tmp_path / "train.log"
    head = "".join(
        f"[Rank 0] step={s}, skipped=0, lr=[1e-05], mom=[(0.9, 0.999)]\n" for s in range(10, 60, 10)
    )
    overflows = (
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8, reducing to 4\n"
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4, reducing to 2\n"
    )
    log.write_text(head)
    tail = open_tail(log)
    assert [s for s, _ in tail.poll()] == [10, 20, 30, 40, 50]
    log.write_text(head + overflows)
    assert {s for s, _ in tail.poll()} == {50}
    log.write_text(head + overflows + "[Rank 0] step=60, skipped=2, lr=[1e-05]\n")
    assert [s for s, _ in tail.poll()] == [60]
