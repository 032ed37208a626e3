"""Generate the bad-input corpus of issue 9 into a directory (at test time; nothing committed).

Each :class:`Case` names what to ingest, which reader module must exist for it, and the one
acceptable outcome: ``"error"`` (exit 2, one line naming the file), ``"data"`` (exit 0 with
exactly the expected points, plus a warning naming the file when ``warn``), or ``"either"``
(one of the two; when data comes back every value must still be right). ``subset`` cases may
lose the damaged record but never report a wrong number.

Run ``python tests/corpus/make_bad_inputs.py DIR`` to look at the files.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NAN, INF = float("nan"), float("inf")
Points = dict[str, list[tuple[int, float]]]


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    reader: str  # module that must exist (else the case is skipped visibly)
    outcome: str  # "error" | "data" | "either"
    expect: Points | None = None  # key as logged -> [(step, value)] in step order
    warn: bool = False  # a warning naming the file is required
    message: str = ""  # the error must contain this
    subset: bool = False  # damaged records may be missing; min_points must survive
    min_points: int = 0
    by_metric: bool = False  # expect is keyed by canonical metric instead of the logged key


CSV, JSONL = "proxydiag.ingest.tabular.csv", "proxydiag.ingest.tabular.jsonl"
TB, CONSOLE = "proxydiag.ingest.tensorboard", "proxydiag.ingest.console"
MLFLOW, PARQUET = "proxydiag.ingest.mlflow.files", "proxydiag.ingest.tabular.parquet"
STATE = "proxydiag.ingest.tabular.trainer_state"

HOSTILE = [
    "actor/grad norm",
    "rollout_corr/k3_kl",
    "ünïcødé/λ",
    "<img src=x onerror=alert(1)>",
    "$(rm -rf ~); `id` | & > x",
    "a'b\"c",
    "[/b] [red]rich markup",
]


def _write(root: Path, name: str, data: bytes | str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def csv_cases(root: Path) -> list[Case]:
    w: Callable[[str, bytes | str], Path] = lambda n, d: _write(root / "csv", n, d)  # noqa: E731
    many = "".join(f"{i},1.5\n" for i in range(1, 417))
    names = ",".join('"' + n.replace('"', '""') + '"' for n in HOSTILE)
    return [
        Case(
            "csv_ragged_long_row",
            w("ragged_long.csv", "step,a\n1,2\n2,3,4\n"),
            CSV,
            "error",
            message=":3: 3 fields",
        ),
        Case(
            "csv_ragged_short_row",
            w("ragged_short.csv", "step,a,b\n1,2,3\n2,3\n3,4,5\n"),
            CSV,
            "error",
            message=":3: 2 fields",
        ),
        Case(
            "csv_cut_last_row",
            w("cut.csv", "step,a,b\n1,2,3\n2,4,5\n3,6"),
            CSV,
            "data",
            {"a": [(1, 2.0), (2, 4.0)], "b": [(1, 3.0), (2, 5.0)]},
            warn=True,
        ),
        Case(
            "csv_non_numeric_cell",
            w("metrics.csv", "step,actor/grad_norm\n" + many + "417,abc\n"),
            CSV,
            "error",
            message=":418: 'abc' is not a number in column actor/grad_norm",
        ),
        Case(
            "csv_duplicated_header_names",
            w("dup_cols.csv", "step,loss,loss\n1,0.5,0.75\n"),
            CSV,
            "data",
            {"loss": [(1, 0.5)], "loss#2": [(1, 0.75)]},
            warn=True,
        ),
        Case(
            "csv_header_repeated_after_restart",
            w("restart.csv", "step,loss\n1,1\n2,2\n3,3\nstep,loss\n2,20\n3,30\n"),
            CSV,
            "data",
            {"loss": [(1, 1.0), (2, 20.0), (3, 30.0)]},
        ),
        Case(
            "csv_bom",
            w("bom.csv", b"\xef\xbb\xbfstep,loss\n1,0.5\n"),
            CSV,
            "data",
            {"loss": [(1, 0.5)]},
        ),
        Case(
            "csv_windows_newlines",
            w("crlf.csv", "step,loss\r\n1,0.5\r\n\r\n2,0.25\r\n"),
            CSV,
            "data",
            {"loss": [(1, 0.5), (2, 0.25)]},
        ),
        Case(
            "csv_mixed_nan_spellings",
            w(
                "nans.csv",
                "step,v\n1,nan\n2,NaN\n3,inf\n4,Infinity\n5,-inf\n6,null\n7,\n8,-Infinity\n",
            ),
            CSV,
            "data",
            {"v": [(1, NAN), (2, NAN), (3, INF), (4, INF), (5, -INF), (6, NAN), (8, -INF)]},
        ),
        Case(
            "csv_steps_backwards",
            w("backwards.csv", "step,loss\n10,1\n11,2\n12,3\n5,50\n6,60\n"),
            CSV,
            "data",
            {"loss": [(5, 50.0), (6, 60.0)]},
        ),
        Case(
            "csv_duplicated_steps",
            w("dupsteps.csv", "step,loss\n1,1\n2,2\n2,2.5\n3,3\n"),
            CSV,
            "data",
            {"loss": [(1, 1.0), (2, 2.5), (3, 3.0)]},
        ),
        Case(
            "csv_gigantic_step",
            w("huge.csv", "step,loss\n1,1\n99999999999999999999,2\n"),
            CSV,
            "error",
            message=":3: step '99999999999999999999' is not an integer that fits in 64 bits",
        ),
        Case(
            "csv_plus_minus_1e308",
            w("big.csv", "step,v\n1,1e308\n2,-1e308\n3,1.7976931348623157e308\n"),
            CSV,
            "data",
            {"v": [(1, 1e308), (2, -1e308), (3, 1.7976931348623157e308)]},
        ),
        Case(
            "csv_hostile_metric_names",
            w("names.csv", f"step,{names}\n1,{','.join(map(str, range(len(HOSTILE))))}\n"),
            CSV,
            "data",
            {n: [(1, float(i))] for i, n in enumerate(HOSTILE)},
        ),
        Case(
            "csv_glob_characters_in_file_name",
            w("run[1]*?.csv", "step,loss\n1,0.5\n"),
            CSV,
            "data",
            {"loss": [(1, 0.5)]},
        ),
        Case("csv_zero_length", w("empty.csv", b""), CSV, "error", message="empty file"),
        Case(
            "csv_header_only", w("header.csv", "step,loss\n"), CSV, "error", message="no data rows"
        ),
        Case(
            "csv_not_utf8",
            w("latin1.csv", "step,loss\n1,0.5\n2,\xe9\n".encode("latin-1")),
            CSV,
            "error",
        ),
    ]


def jsonl_cases(root: Path) -> list[Case]:
    w: Callable[[str, bytes | str], Path] = lambda n, d: _write(root / "jsonl", n, d)  # noqa: E731
    return [
        Case(
            "jsonl_line_cut_in_half",
            w("cut.jsonl", '{"step": 1, "loss": 1.5}\n{"step": 2, "loss": 2.5}\n{"step": 3, "lo'),
            JSONL,
            "data",
            {"loss": [(1, 1.5), (2, 2.5)]},
            warn=True,
        ),
        Case(
            "jsonl_nan_infinity_tokens",
            w(
                "tokens.jsonl",
                '{"step": 1, "a": NaN, "b": Infinity}\n{"step": 2, "a": -Infinity}\n',
            ),
            JSONL,
            "data",
            {"a": [(1, NAN), (2, -INF)], "b": [(1, INF)]},
        ),
        Case(
            "jsonl_verl_null",
            w(
                "verl.jsonl",
                '{"step": 1, "data": {"actor/grad_norm": null, "actor/pg_loss": 0.5}}\n',
            ),
            JSONL,
            "data",
            {"actor/grad_norm": [(1, NAN)], "actor/pg_loss": [(1, 0.5)]},
        ),
        Case(
            "jsonl_broken_middle_line",
            w("broken.jsonl", '{"step": 1, "a": 1}\n{"step": 2, "a": \n{"step": 3, "a": 3}\n'),
            JSONL,
            "error",
            message=":2: not valid JSON",
        ),
        Case(
            "jsonl_gigantic_step",
            w("huge.jsonl", '{"step": 99999999999999999999, "a": 1}\n'),
            JSONL,
            "error",
            message="does not fit in 64 bits",
        ),
    ]


def _records(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte ranges of the TFRecords in an event file."""
    out, at = [], 0
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at : at + 8])
        end = at + 12 + length + 4
        out.append((at, end))
        at = end
    return out


def tensorboard_cases(root: Path) -> list[Case]:
    from tensorboardX import SummaryWriter

    values = [0.5 * i for i in range(10)]  # exact in float32 (simple_value)
    expect = {"loss": list(enumerate(values))}

    def logdir(name: str) -> tuple[Path, Path, bytes]:
        folder = root / "tb" / name
        writer = SummaryWriter(str(folder))
        for step, value in enumerate(values):
            writer.add_scalar("loss", value, step)
        writer.close()
        (event,) = folder.glob("events.out.tfevents.*")
        return folder, event, event.read_bytes()

    cases = []
    folder, event, data = logdir("truncated")
    start, _ = _records(data)[-1]
    event.write_bytes(data[: start + 10])
    cases.append(
        Case(
            "tb_truncated_last_record",
            folder,
            TB,
            "data",
            expect,
            warn=True,
            subset=True,
            min_points=9,
        )
    )
    folder, event, data = logdir("flipped_crc")
    _, end = _records(data)[4]
    event.write_bytes(data[: end - 2] + bytes([data[end - 2] ^ 0xFF]) + data[end - 1 :])
    cases.append(
        Case(
            "tb_flipped_crc_byte", folder, TB, "data", expect, warn=True, subset=True, min_points=3
        )
    )
    folder, event, data = logdir("garbage")
    _, end = _records(data)[6]
    event.write_bytes(data[:end] + b"\x07garbage\xff\x00" * 4 + data[end:])
    cases.append(
        Case(
            "tb_garbage_between_records",
            folder,
            TB,
            "data",
            expect,
            warn=True,
            subset=True,
            min_points=6,
        )
    )
    folder, event, _ = logdir("zero_beside_good")
    (folder / "events.out.tfevents.0000000001.host.1.0").write_bytes(b"")
    cases.append(Case("tb_zero_length_beside_good", folder, TB, "data", expect))
    empty = _write(root / "tb" / "zero", "events.out.tfevents.0000000001.host.1.0", b"")
    cases.append(Case("tb_zero_length_file", empty, TB, "either", {}))
    folder = root / "tb" / "hostile_tags"
    writer = SummaryWriter(str(folder))
    for i, tag in enumerate(HOSTILE):
        writer.add_scalar(tag, float(i), 1)
    writer.close()
    from tensorboardX.summary import _clean_tag  # the writer's own sanitising of tag names

    cases.append(
        Case(
            "tb_hostile_tag_names",
            folder,
            TB,
            "data",
            {_clean_tag(t): [(1, float(i))] for i, t in enumerate(HOSTILE)},
        )
    )
    return cases


def console_cases(root: Path) -> list[Case]:
    lines = []
    for it in (10, 20, 30):
        line = (
            f" iteration {it:8d}/     100 | consumed samples: {it * 4:12d} | elapsed time per "
            f"iteration (ms): 1000.0 | learning rate: 1.000000E-04 | global batch size:     4 | "
            f"lm loss: {2.5 - it / 100:.6E} | loss scale: 65536.0 | grad norm: 1.250 | number of "
            "skipped iterations:   0 | number of nan iterations:   0 |"
        )
        lines += [line, line]  # two ranks print the same line, interleaved
    megatron = _write(root / "console", "megatron_ranks.log", "\n".join(lines) + "\n")
    ds = []
    for step in (1, 2, 3):
        for rank in (0, 1):
            ds.append(
                f"[2024-01-01 00:00:0{step},000] [INFO] [loss_scaler.py:181:update_scale] "
                f"[deepspeed] OVERFLOW! Rank {rank} Skipping step. Attempted loss scale: "
                f"{2 ** (17 - step)}, reducing to {2 ** (16 - step)}"
            )
        ds.append(
            f"[2024-01-01 00:00:0{step},500] [INFO] [logging.py:96:log_dist] [Rank 0] "
            f"step={step}, skipped={step}, lr=[1e-05], mom=[(0.9, 0.95)]"
        )
    deepspeed = _write(root / "console", "deepspeed_ranks.log", "\n".join(ds) + "\n")
    return [
        Case(
            "console_megatron_interleaved_ranks",
            megatron,
            CONSOLE,
            "data",
            {"lm loss": [(10, 2.4), (20, 2.3), (30, 2.2)]},
        ),
        # two ranks report each overflow: one skip per step, never two
        Case(
            "console_deepspeed_interleaved_ranks",
            deepspeed,
            CONSOLE,
            "data",
            {
                "loss_scale": [(1, 32768.0), (2, 16384.0), (3, 8192.0)],
                "skipped": [(1, 1.0), (2, 1.0), (3, 1.0)],
            },
            by_metric=True,
        ),
    ]


def mlflow_cases(root: Path) -> list[Case]:
    run = root / "mlruns" / "1" / "0123456789abcdef0123456789abcdef"
    _write(
        root / "mlruns" / "1",
        "meta.yaml",
        "artifact_location: x\nexperiment_id: '1'\nlifecycle_stage: active\nname: exp\n",
    )
    _write(
        run / "metrics", "loss", "1700000000000 0.5 1\n1700000001000 nan 2\n1700000002000 -inf 3\n"
    )
    _write(run / "params", "lr", "1e-4")
    return [
        Case(
            "mlruns_run_missing_meta_yaml",
            root / "mlruns",
            MLFLOW,
            "data",
            {"loss": [(1, 0.5), (2, NAN), (3, -INF)]},
            warn=True,
        )
    ]


def other_cases(root: Path) -> list[Case]:
    state = json.dumps({"log_history": [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}]})
    import polars as pl

    parquet = root / "other" / "cut.parquet"
    parquet.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"step": [1, 2], "loss": [0.5, 0.25]}).write_parquet(parquet)
    parquet.write_bytes(parquet.read_bytes()[:-20])
    return [
        Case(
            "trainer_state_truncated",
            _write(root / "other", "trainer_state.json", state[:-15]),
            STATE,
            "error",
            message="invalid JSON",
        ),
        Case("parquet_truncated", parquet, PARQUET, "error", message="cannot read as Parquet"),
        Case(
            "unknown_binary_file",
            _write(root / "other", "blob.bin", bytes(range(256)) * 4),
            CSV,
            "error",
            message="unknown format",
        ),
    ]


def make(root: Path) -> list[Case]:
    """Write every case under ``root`` and describe them."""
    return [
        *csv_cases(root),
        *jsonl_cases(root),
        *tensorboard_cases(root),
        *console_cases(root),
        *mlflow_cases(root),
        *other_cases(root),
    ]


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "bad_inputs")
    for case in make(target):
        print(f"{case.name:40s} {case.outcome:7s} {case.path}")
