"""Property tests and a bounded fuzz target for the console-log reader (issue 9).

Random text, random bytes and mutated real-looking lines must give a Run, a warning plus
what is intact, or an IngestError -- never another exception. Numbers written in any
dialect are read back exactly (bit for bit; NaN and ±inf included).
"""

from __future__ import annotations

import math
import struct
import tempfile
import warnings
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxydiag.errors import IngestError
from proxydiag.ingest import ReadContext, console

SEEDS = [
    " iteration       20/    1000 | consumed samples:           80 | elapsed time per iteration "
    "(ms): 1354.9 | learning rate: 3.750E-05 | lm loss: 1.203115E+01 | loss scale: 32768.0 | "
    "number of skipped iterations:   8 | number of nan iterations:   0 |",
    "[2023-04-18 01:46:52,554] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! "
    "Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. "
    "Reducing hysteresis to 1",
    "[2023-04-18 01:46:59,142] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=6, "
    "lr=[9.649992967150629e-06, 9.649992967150629e-06], mom=[(0.9, 0.95), (0.9, 0.95)]",
    "Grad overflow on iteration 0",
    "[2025-01-02 15:47:32,712] [INFO] [fused_optimizer.py:393:_update_scale] Reducing dynamic "
    "loss scale from 65536 to 32768.0",
    "epoch: 0|step: 0|ppo_ep: 1|act_loss: 0.2099609375|cri_loss: 0.12042236328125|"
    "unsuper_loss: 0.0",
    "average reward score: -0.67919921875",
    "|E2E latency=7.99s |Gather latency=0.00s (0.00%) "
    "|CurSamplesPerSec=8.01 |AvgSamplesPerSec=8.01",
    '2021-03-01 10:00:00 | INFO | train_inner | {"epoch": 1, "loss": "9.82", "num_updates": "100"}',
    "NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0",
    "step:3 - actor/pg_loss:np.float64(0.012) - critic/score/mean:0.5",
    "WARN: rank 0 grad_norm is not finite: inf",
    "step 3: {'train/loss': 0.5, 'train/grad_norm': 1.5}",
    "{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}",
    "[2025-01-01 12:00:00] iteration: 3 / 100 | actor/pg_loss : 0.0123 | actor/lr : 1.000000e-06",
    " validation loss at iteration 100 | lm loss value: 8.017406E+00 | lm loss PPL: 3.033300E+03 |",
    "ppl: 4998.29638671875",
    "Step at 4 with Perplexity: nan",
]

#: inputs that once broke the reader; each must keep parsing
REGRESSIONS = [
    b"step=99999999999999999999, skipped=0, lr=[1]\n",  # a step beyond Int64
    b"step 99999999999999999999: {'a': 1}\n",
    b"{'loss': 1e999, 'x': 10**400}\n",  # ints beyond float range
    b"Grad overflow on iteration 0\n" * 3,  # overflow rows and no progress line at all
    b"ppl: 1.0\naverage reward score: 2\n",  # attached lines with nothing to attach to
    # an overflow line whose iteration is beyond Int64 was an anchor without a step
    b" iteration 20/ 1000 | lm loss: 1.2E+01 | loss scale: 32768.0 |\n"
    b"Grad overflow on iteration9999999999999999999999999\n",
]


def _read(data: bytes, *, chunk_bytes: int = 1 << 20) -> pl.DataFrame | None:
    """Parse ``data`` as a log; None when the reader refused it with an IngestError."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.log"
        path.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ctx = ReadContext(options={"chunk_bytes": chunk_bytes})
                run = console.read(path, ctx)[0]
            except IngestError:
                return None
    return run.frame


def _same(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))


def test_regressions_keep_parsing() -> None:
    for data in REGRESSIONS:
        _read(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=120), max_size=12))
def test_random_text_never_raises_other_errors(lines: list[str]) -> None:
    _read("\n".join(lines).encode("utf-8", errors="replace"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.integers(min_value=1, max_value=64))
def test_random_bytes_never_raise_other_errors(data: bytes, chunk: int) -> None:
    _read(data, chunk_bytes=chunk)


_values = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=60, deadline=None)
@given(st.lists(_values, min_size=1, max_size=5))
def test_numbers_written_are_read_back_exactly(values: list[float]) -> None:
    lines = []
    for i, x in enumerate(values, start=1):
        lines.append(f" iteration {i:8d}/ 100 | lm loss: {x!r} | grad norm: {x!r} |")
        lines.append(f"step:{i} - actor/pg_loss:np.float64({x!r}) - critic/score/mean:{x!r}")
        lines.append(f"[2025-01-01 12:00:00] iteration: {i} / 100 | actor/entropy : {x!r}")
        lines.append(f"step={i}, skipped=0, lr=[{x!r}, {x!r}], mom=[(0.9, 0.95)]")
        lines.append(
            f'| INFO | train_inner | {{"epoch": 1, "gnorm": "{x!r}", "num_updates": "{i}"}}'
        )
        lines.append(f"step {i}: {{'train/kl': {x!r}}}")
    frame = _read("\n".join(lines).encode() + b"\n")
    assert frame is not None
    keys = (
        "lm loss",
        "grad norm",
        "actor/pg_loss",
        "critic/score/mean",
        "actor/entropy",
        "lr",
        "gnorm",
        "train/kl",
    )
    for key in keys:
        got = frame.filter(pl.col("key") == key).sort("step")["value"].to_list()
        assert len(got) == len(values) and all(map(_same, got, values)), key


_LAYOUTS = (("lm loss", "grad norm"), ("lm loss", "loss scale", "grad norm"), ("lr",))
_TOKENS = st.one_of(_values.map(repr), st.sampled_from(["", "abc", "np.float64(2.5)", " 7 "]))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_LAYOUTS), st.lists(_TOKENS, min_size=3, max_size=3)),
        min_size=1,
        max_size=8,
    )
)
def test_fields_read_as_numbers_are_the_fields_read_as_text(
    lines: list[tuple[tuple[str, ...], list[str]]],
) -> None:
    """``split_fields(numbers=True)`` (cast column by column, keys from codes) gives the rows
    the text path and its checks give, on blocks of several layouts and values that are no
    plain numbers (those take the text path)."""
    from proxydiag.ingest.console._fields import split_fields
    from proxydiag.ingest.console._records import checked

    text = [
        f" iteration {i}/ 9 | "
        + " | ".join(f"{k}: {v}" for k, v in zip(keys, vals, strict=False))
        + " |"
        for i, (keys, vals) in enumerate(lines, start=1)
    ]
    frame = pl.DataFrame({"line": range(1, len(text) + 1), "text": text})
    fast = split_fields(frame, sep=" | ", kv=":", keep=("line",), numbers=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        slow = checked(
            split_fields(frame, sep=" | ", kv=":", keep=("line",)),
            path=Path("x.log"),
            raw="raw",
            what="Megatron",
        )
        if "raw" in fast.columns:
            fast = checked(fast, path=Path("x.log"), raw="raw", what="Megatron")

    def rows(f: pl.DataFrame) -> list[tuple[int, str, bytes]]:
        return [
            (a, b, struct.pack("<d", c))
            for a, b, c in f.select("line", pl.col("key").cast(pl.Utf8), "value").rows()
        ]

    assert sorted(rows(fast)) == sorted(rows(slow))
    for key in fast["key"].cast(pl.Utf8).unique():  # rows of one key in the lines' order
        at = fast.filter(pl.col("key").cast(pl.Utf8) == key)["line"].to_list()
        assert at == sorted(at)


@st.composite
def _mutated_logs(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.sampled_from(SEEDS), min_size=1, max_size=10))
    out = []
    for line in lines:
        data = line.encode()
        op = draw(st.sampled_from(["keep", "cut", "splice", "bytes", "digits", "dup"]))
        at = draw(st.integers(min_value=0, max_value=len(data)))
        if op == "cut":
            data = data[:at]
        elif op == "splice":
            data = data[:at] + draw(st.sampled_from(SEEDS)).encode()
        elif op == "bytes":
            data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
        elif op == "digits":
            data = (
                data[:at]
                + draw(st.sampled_from([b"9" * 25, b"-", b"nan", b"1e999", b"|"]))
                + data[at:]
            )
        elif op == "dup":
            data = data + b"\n" + data
        out.append(data)
    sep = draw(st.sampled_from([b"\n", b"\r\n"]))
    return sep.join(out) + draw(st.sampled_from([b"", sep]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_logs(), st.integers(min_value=16, max_value=4096))
def test_fuzz_mutated_real_lines(data: bytes, chunk: int) -> None:
    """A bounded fuzz target (~5 s): mutations of real lines from every dialect."""
    frame = _read(data, chunk_bytes=chunk)
    if frame is not None:
        assert frame["step"].null_count() == 0
        assert frame.schema["value"] == pl.Float64


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(
        st.text(
            st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=30
        ),
        max_size=20,
    ),
    endings=st.lists(st.sampled_from(["\n", "\r\n", "\r\r\n"]), min_size=20, max_size=20),
    chunk=st.integers(1, 64),
)
def test_lines_are_split_as_python_does(lines: list[str], endings: list[str], chunk: int) -> None:
    """Blocks are cut into lines without their newline and trailing carriage returns (the fast
    path for blocks without one, the general path for the others), at any block size."""
    from proxydiag.ingest.console._lines import iter_lines

    text = "".join(line + end for line, end in zip(lines, endings, strict=False))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.txt"
        path.write_bytes(text.encode("utf-8"))
        got = [t for frame in iter_lines(path, chunk_bytes=chunk) for t in frame["text"].to_list()]
    assert got == [line.rstrip("\r") for line in text.split("\n")[:-1]]
