"""The metric-line grammar: lines generated from random keys, values, separators, prefixes and
step spellings are read back exactly; lines that are not metric lines give no points."""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxydiag.ingest import console

WORDS = ("loss", "grad_norm", "reward", "entropy", "kl", "lr", "clip_ratio", "tps", "mfu")
NAMESPACES = ("", "train/", "actor/", "critic/score/", "perf/")
PREFIXES = (
    "",
    "2026-12-07 10:00:00,123 - INFO - root - ",
    "[rank0]: ",
    "[default3]:",
    "(WorkerDict pid=4242) ",
    "(TaskRunner pid=17, ip=10.0.0.3) ",
    "12/07/2026 10:01:02 - INFO - __main__ - ",
    "\x1b[32m[INFO]\x1b[0m ",
    "[2026-12-07 10:00:00] ",
    "INFO:trainer:",
)
#: (how the step is spelt, its separator from the pairs)
STEPS = (
    "step {s}",
    "step: {s}",
    "step={s}",
    "Step {s}/999",
    "iter {s}",
    "iteration {s}",
    "global_step: {s}",
    "global step {s}",
    "current_steps: {s}",
    "Iter(train) [{s}/99999]",
    "update {s}",
    "episode: {s}",
)
SEPS = (" | ", "  ", ", ", " - ", "\t")
KVS = (": ", "=", ":", " = ")


def _fmt(value: float, style: int) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if style == 0:
        return repr(value)
    if style == 1:
        return f"{value:.6e}"
    return f"'{value!r}'"


@st.composite
def _lines(draw: st.DrawFn) -> tuple[list[str], dict[str, list[tuple[int, float]]]]:
    keys = draw(
        st.lists(
            st.builds(lambda ns, w: ns + w, st.sampled_from(NAMESPACES), st.sampled_from(WORDS)),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    prefix = draw(st.sampled_from(PREFIXES))
    spelling = draw(st.sampled_from(STEPS))
    sep = draw(st.sampled_from(SEPS))
    kv = draw(st.sampled_from(KVS))
    style = draw(st.integers(0, 2))
    n = draw(st.integers(1, 6))
    value = st.one_of(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
        st.sampled_from([math.nan, math.inf, -math.inf]),
    )
    lines, want = [], {k: [] for k in keys}
    step = draw(st.integers(1, 50))
    for _ in range(n):
        step += draw(st.integers(1, 20))
        pairs = []
        for k in keys:
            text = _fmt(draw(value), style)
            pairs.append(f"{k}{kv}{text}")
            want[k].append((step, float(text.strip("'"))))  # the number as printed
        lines.append(prefix + spelling.format(s=step) + sep + sep.join(pairs))
    return lines, want


def _read(text: str) -> dict[str, list[tuple[int, float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        path.write_text(text, encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = console.parse(path).raw
    out: dict[str, list[tuple[int, float]]] = {}
    # in step order (a line that reports on the step in force is read after its dialect's)
    rows = raw.sort("step", maintain_order=True).select("key", "step", "value").iter_rows()
    for key, step, value in rows:
        out.setdefault(str(key), []).append((int(step), float(value)))
    return out


def _equal(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lines())
def test_generated_metric_lines_are_read_back_exactly(case: tuple) -> None:  # type: ignore[type-arg]
    lines, want = case
    got = _read("\n".join(lines) + "\n")
    assert sorted(got) == sorted(want), (lines[0], sorted(got))
    for key, pts in want.items():
        assert len(got[key]) == len(pts), (lines, key, got[key])
        for (s1, v1), (s2, v2) in zip(got[key], pts, strict=True):
            assert s1 == s2 and _equal(v1, v2), (lines, key, got[key], pts)


def test_lines_that_are_not_metric_lines_give_no_points() -> None:
    text = "\n".join(
        [
            "step 10 | loss: 2.5 | lr: 1e-05",
            "  learning_rate: 1e-05",
            "  max_steps: 1000",
            "  warmup_ratio = 0.03",
            "model.layers.0.mlp.experts.3.weight torch.Size([1024, 4096]) dtype=torch.bfloat16",
            "Namespace(lr=0.0001, batch_size=32, seed=42)",
            "Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.20it/s]",
            "step 20 | loss: 2.25 | lr: 1e-05",
        ]
    )
    got = _read(text + "\n")
    assert got == {"loss": [(10, 2.5), (20, 2.25)], "lr": [(10, 1e-05), (20, 1e-05)]}


def test_numbers_with_separators_units_and_multipliers() -> None:
    got = _read(
        "step: 5  memory: 31.2GiB(40.1%)  tps: 12,345  mfu: 45%  tokens: 1.2k  "
        "throughput: 812 tokens/s  loss: 1.00e-05\n"
    )
    assert got == {
        "memory": [(5, 31.2)],
        "tps": [(5, 12345.0)],
        "mfu": [(5, 45.0)],
        "tokens": [(5, 1200.0)],
        "throughput": [(5, 812.0)],
        "loss": [(5, 1e-05)],
    }


def test_a_warning_that_carries_a_metric_is_a_point_at_the_step_in_force() -> None:
    got = _read("step 7 | loss: 2.0\nWARNING: loss is nan, skipping\nstep 8 | loss: 1.9\n")
    assert [s for s, _ in got["loss"]] == [7, 7, 8]
    assert math.isnan(got["loss"][1][1])


def test_a_file_without_step_counters_reads_its_metric_lines_in_order() -> None:
    got = _read("loss: 2.5, acc: 0.5\nsome note 3\nloss: 2.25, acc: 0.625\n")
    assert got == {"loss": [(1, 2.5), (2, 2.25)], "acc": [(1, 0.5), (2, 0.625)]}


def test_epochs_and_batches() -> None:
    zero = _read(
        "Epoch 0: 10%|#| 10/100 [00:01<00:09, 9.1it/s, loss=2.5]\n"
        "Epoch 1: 20%|#| 20/100 [00:02<00:08, 9.1it/s, loss=2.25]\n"
    )
    assert zero == {"loss": [(10, 2.5), (120, 2.25)]}
    mm = _read("Epoch(train) [2][ 50/500]  lr: 2.0000e-05  loss: 1.5\n")
    assert mm == {"lr": [(550, 2e-05)], "loss": [(550, 1.5)]}


def test_a_tailed_chunk_without_steps_is_no_restart(tmp_path: Path) -> None:
    """A live tail reads each appended chunk as a file: a chunk of step-less metric lines (a
    run-end summary) must not take its order as steps (1, 2, ...: a restart at step 1)."""
    from proxydiag.ingest import ReadContext
    from proxydiag.ingest.tail.lines import LineTail

    path = tmp_path / "train.log"
    path.write_text("step 10 | loss: 2.5\nstep 20 | loss: 2.25\n", encoding="utf-8")
    tail = LineTail(path, reader=console, ctx=ReadContext())  # type: ignore[arg-type]
    assert [s for s, _ in tail.poll()] == [10, 20]
    with path.open("a", encoding="utf-8") as fh:
        fh.write("train_runtime: 61.3, train_loss: 2.4\n")
        fh.write("{'train_runtime': '61.3', 'train_loss': '2.4', 'epoch': '1.0'}\n")
    assert tail.poll() == []
