"""Black-box contract of every ``proxydiag`` command, each run as a real subprocess.

Bad input exits 2 with one stderr line naming the offending file or value (or click's usage
error), never a traceback, and an unreachable MLflow server fails fast. Good input on the
checked-in ``sample_runs/`` prints JSON valid against ``proxydiag/schemas/``, and ``--fail-on``
exits 1 exactly when it matched. Interpreter start-up dominates each command, so the commands
run on a small thread pool, started when the module's first test asks for a result (the timed
MLflow cases first, alone).
``demo`` and ``lab suite`` are too slow for this file (they have their own tests).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests._paths import SAMPLES, SCHEMAS

#: the group used: logged every 5 steps (small), and its proxies are faithful, unfaithful, partial
GROUP = "precision-gradual-climb"
#: seconds any one command may take before it counts as a hang
TIMEOUT_S = 90.0
#: an unreachable MLflow server must fail the command within this many seconds of the time
#: it takes to start the CLI with mlflow imported (measured beside it: on a loaded machine the
#: start alone took 32 s; mlflow's own retries to an unreachable server take minutes)
MLFLOW_FAIL_FAST_S = 20.0
PARALLEL = 4


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float

    def __str__(self) -> str:  # shown by pytest when an assertion fails
        return (
            f"proxydiag {' '.join(self.args)} -> exit {self.code} in {self.seconds:.1f} s\n"
            f"--- stdout\n{self.out[-2000:]}\n--- stderr\n{self.err[-2000:]}"
        )


def _cli(args: list[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> Result:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    environ.update(PROXYDIAG_STORE=str(cwd / "default-store"), NO_COLOR="1", **(env or {}))
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "proxydiag", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    return Result(tuple(args), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def _labels() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SAMPLES / "labels.json").read_text(encoding="utf-8"))
    return data


def _runs() -> dict[str, str]:
    """Placeholders for runs of GROUP, chosen by their ground truth in labels.json."""
    labels = _labels()
    group = {rid: r for rid, r in labels["runs"].items() if r["group"] == GROUP}
    fulls = sorted((r["seed"], rid) for rid, r in group.items() if r["role"] == "full")
    pairs = [
        p
        for p in labels["pairs"].values()
        if p["proxy"] in group and group[p["proxy"]]["role"] == "proxy"
    ]
    faithful = next(p["proxy"] for p in pairs if p["faithful"])
    unfaithful = next(p["proxy"] for p in pairs if p["why"].startswith("fault_"))
    named = {
        "full0": fulls[0][1],
        "full1": fulls[1][1],
        "faithful": faithful,
        "unfaithful": unfaithful,
    }
    paths = {key: str(SAMPLES / group[rid]["path"]) for key, rid in named.items()}
    return paths | {f"{key}_name": rid for key, rid in named.items()}


RUNS = _runs()
COMPARE = ["compare", "--full", "{full0}", "--full", "{full1}"]

#: (case id, argv with {placeholders}, text the error line must contain); {mlflow} cases get
#: MLFLOW_TRACKING_URI of a closed port
BAD: list[tuple[str, list[str], str]] = [
    ("diagnose-missing-path", ["diagnose", "{work}/no/such/run"], "{work}/no/such/run"),
    ("diagnose-unknown-format", ["diagnose", "{work}/unknown.xyz"], "unknown.xyz"),
    ("diagnose-empty-dir", ["diagnose", "{work}/empty"], "{work}/empty"),
    (
        "diagnose-bad-config-toml",
        ["diagnose", "{full0}", "--config", "{work}/bad.toml"],
        "bad.toml",
    ),
    (
        "diagnose-bad-aliases-toml",
        ["diagnose", "{full0}", "--aliases", "{work}/bad.toml"],
        "bad.toml",
    ),
    (
        "diagnose-aliases-unknown-table",
        ["diagnose", "{full0}", "--aliases", "{work}/typo.toml"],
        "typo.toml",
    ),
    ("diagnose-unknown-format-option", ["diagnose", "{full0}", "--format", "yaml"], "yaml"),
    ("diagnose-unknown-fail-on", ["diagnose", "{full0}", "--fail-on", "bogus"], "bogus"),
    (
        "diagnose-option-without-value",
        ["diagnose", "{full0}", "--format"],
        "(see 'proxydiag diagnose --help')",
    ),
    (
        "diagnose-unknown-run-id",
        ["diagnose", "nosuchrun", "--store", "{work}/no-store"],
        "nosuchrun",
    ),
    ("diagnose-mlflow-down", ["diagnose", "runs:/abc", "{mlflow}"], "127.0.0.1:{port}"),
    (
        "ingest-missing-path",
        ["ingest", "{work}/no/such/run", "--store", "{work}/st"],
        "{work}/no/such/run",
    ),
    ("ingest-store-is-file", ["ingest", "{full0}", "--store", "{work}/afile"], "afile"),
    (
        "ingest-bad-aliases-toml",
        ["ingest", "{full0}", "--aliases", "{work}/bad.toml", "--store", "{work}/st"],
        "bad.toml",
    ),
    (
        "ingest-mlflow-down",
        ["ingest", "runs:/abc", "--store", "{work}/st", "{mlflow}"],
        "127.0.0.1:{port}",
    ),
    ("runs-store-is-file", ["runs", "--store", "{work}/afile"], "afile"),
    (
        "compare-missing-path",
        ["compare", "--full", "{work}/no/such/run", "--proxy", "{faithful}"],
        "{work}/no/such/run",
    ),
    (
        "compare-unknown-format-option",
        [*COMPARE, "--proxy", "{faithful}", "--format", "yaml"],
        "yaml",
    ),
    ("compare-unknown-fail-on", [*COMPARE, "--proxy", "{faithful}", "--fail-on", "bogus"], "bogus"),
    (
        "compare-bad-config-toml",
        [*COMPARE, "--proxy", "{faithful}", "--config", "{work}/bad.toml"],
        "bad.toml",
    ),
    ("compare-unknown-align", [*COMPARE, "--proxy", "{faithful}", "--align", "bogus"], "bogus"),
    (
        "report-missing-path",
        ["report", "{work}/no/such/run", "-o", "{work}/r.html"],
        "{work}/no/such/run",
    ),
    (
        "report-unknown-format-option",
        ["report", "{full0}", "-f", "pdf", "-o", "{work}/r.pdf"],
        "pdf",
    ),
    (
        "report-unknown-fail-on",
        ["report", "{full0}", "--fail-on", "bogus", "-o", "{work}/r.html"],
        "bogus",
    ),
    ("report-output-is-dir", ["report", "{full0}", "-o", "{work}/empty"], "{work}/empty"),
    (
        "dashboard-store-is-file",
        ["dashboard", "--store", "{work}/afile", "-o", "{work}/dash"],
        "afile",
    ),
    ("mlflow-sync-store-is-file", ["mlflow", "sync", "--store", "{work}/afile"], "afile"),
    (
        "mlflow-runs-server-down",
        ["mlflow", "runs", "--mlflow-experiment", "x", "{mlflow}"],
        "127.0.0.1:{port}",
    ),
    ("synth-unknown-scenario", ["synth", "-o", "{work}/syn", "--scenario", "nosuch"], "nosuch"),
    (
        "bench-diagnose-missing-corpus",
        ["bench", "diagnose", "{work}/no/such/corpus"],
        "{work}/no/such/corpus",
    ),
    ("bench-compare-empty-dir", ["bench", "compare", "{work}/empty"], "{work}/empty"),
    (
        "lab-run-unknown-fault",
        ["lab", "run", "-o", "{work}/lab", "--fault", "nosuch"],
        "nosuch" if importlib.util.find_spec("torch") else "proxydiag[lab]",
    ),
    ("unknown-command", ["nosuchcommand"], "nosuchcommand"),
]

#: good input: (case id, argv)
GOOD: list[tuple[str, list[str]]] = [
    ("version", ["version"]),
    ("diagnose-json", ["diagnose", "{full0}", "{unfaithful}", "--format", "json"]),
    ("diagnose-fail-on-matched", ["diagnose", "{full0}", "--fail-on", "precision_fault"]),
    (
        "diagnose-fail-on-not-matched",
        ["diagnose", "{full0}", "--fail-on", "gradient_overflow,loss_divergence"],
    ),
    (
        "compare-faithful-json",
        [*COMPARE, "--proxy", "{faithful}", "--format", "json", "--fail-on", "partial"],
    ),
    (
        "compare-unfaithful-json",
        [*COMPARE, "--proxy", "{unfaithful}", "--format", "json", "--fail-on", "unfaithful"],
    ),
    ("report-html", ["report", "{full0}", "-o", "{work}/out/report.html"]),
    (
        "report-markdown-fail-on",
        [
            "report",
            "{full0}",
            "-f",
            "markdown",
            "-o",
            "{work}/report.md",
            "--fail-on",
            "precision_fault",
        ],
    ),
    (
        "report-fail-on-partial",
        [
            "report",
            "--full",
            "{full0}",
            "--proxy",
            "{unfaithful}",
            "-f",
            "json",
            "-o",
            "{work}/cmp.json",
            "--fail-on",
            "partial",
        ],
    ),
]

#: the store round trip, in order
STORE = ["--store", "{work}/store"]
ROUND_TRIP: list[list[str]] = [
    ["ingest", "{full0}", "{faithful}", *STORE],
    ["runs", *STORE],
    ["runs", "show", "{full0_name}", *STORE],
    ["diagnose", "{full0_name}", "--format", "json", *STORE],
    ["runs", "show", "nosuchrun", *STORE],
    ["runs", "rm", "{full0_name}", *STORE],
    ["runs", *STORE],
    ["runs", "rm", "{full0_name}", *STORE],
]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _workspace(work: Path) -> dict[str, str]:
    (work / "empty").mkdir()
    (work / "unknown.xyz").write_text("hello world\n", encoding="utf-8")
    (work / "bad.toml").write_text("this is [not toml\n", encoding="utf-8")
    (work / "typo.toml").write_text('[metric.loss]\nkeys = ["x"]\n', encoding="utf-8")
    (work / "afile").write_text("", encoding="utf-8")
    return {"work": str(work), "port": str(_closed_port()), **RUNS}


def _expand(args: list[str], values: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    env = {}
    if "{mlflow}" in args:
        args = [a for a in args if a != "{mlflow}"]
        env["MLFLOW_TRACKING_URI"] = "http://127.0.0.1:{port}".format(**values)
    return [a.format(**values) for a in args], env


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every command of this file, started at once; tests wait for the ones they check."""
    work = tmp_path_factory.mktemp("cli")
    values = _workspace(work)

    def one(argv: list[str]) -> Result:
        args, env = _expand(argv, values)
        return _cli(args, cwd=work, env=env)

    def chain() -> list[Result]:
        return [one(argv) for argv in ROUND_TRIP]

    futures: dict[str, Future[Any]] = {}
    for name, argv, _ in BAD:  # timed: one at a time, before the others load the machine
        if "{mlflow}" in argv:
            futures[name] = Future()
            futures[name].set_result(one(argv))
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import mlflow, proxydiag.cli"], check=True)
    startup_s = time.monotonic() - start
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures["round-trip"] = pool.submit(chain)
        cases = [(n, a) for n, a in GOOD] + [(n, a) for n, a, _ in BAD if "{mlflow}" not in a]
        futures |= {name: pool.submit(one, argv) for name, argv in cases}
        yield {"values": values, "futures": futures, "startup_s": startup_s}


def _result(ctx: dict[str, Any], name: str) -> Any:
    return ctx["futures"][name].result()


def _assert_bad_input(r: Result, needle: str) -> None:
    """exit 2; one stderr line naming ``needle`` (usage errors too); no traceback."""
    assert r.code == 2, r
    assert "Traceback" not in r.out + r.err, r
    assert r.out.strip() == "", r
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1, r
    assert lines[0].startswith("error: ") and needle in lines[0], r


@pytest.mark.parametrize(
    ("name", "needle"), [(n, needle) for n, _, needle in BAD], ids=[n for n, _, _ in BAD]
)
def test_bad_input_exits_2_with_one_line(ctx: dict[str, Any], name: str, needle: str) -> None:
    r = _result(ctx, name)
    _assert_bad_input(r, needle.format(**ctx["values"]))


@pytest.mark.parametrize("name", [n for n, a, _ in BAD if "{mlflow}" in a])
def test_an_unreachable_mlflow_server_fails_fast(ctx: dict[str, Any], name: str) -> None:
    r = _result(ctx, name)
    assert r.code == 2 and r.seconds < ctx["startup_s"] + MLFLOW_FAIL_FAST_S, r


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return schema


def _json_lines(r: Result, schema: str) -> list[dict[str, Any]]:
    assert "Traceback" not in r.out + r.err, r
    objs = [json.loads(line) for line in r.out.splitlines() if line.strip()]
    for obj in objs:
        jsonschema.validate(obj, _schema(schema), cls=jsonschema.Draft202012Validator)
    return objs


def test_version(ctx: dict[str, Any]) -> None:
    from proxydiag import __version__

    r = _result(ctx, "version")
    assert (r.code, r.out.strip()) == (0, __version__), r


def test_diagnose_json_lines_validate_and_name_their_source(ctx: dict[str, Any]) -> None:
    r = _result(ctx, "diagnose-json")
    assert r.code == 0, r
    objs = _json_lines(r, "diagnosis.schema.json")
    values = ctx["values"]
    assert [o["source"] for o in objs] == [values["full0"], values["unfaithful"]]
    assert [o["label"] for o in objs] == ["precision_fault", "precision_fault"]
    assert [o["run"].rsplit("-", 1)[0] for o in objs] == [
        values["full0_name"],
        values["unfaithful_name"],
    ]


def test_diagnose_fail_on_exits_1_only_when_matched(ctx: dict[str, Any]) -> None:
    matched, not_matched = (
        _result(ctx, n) for n in ("diagnose-fail-on-matched", "diagnose-fail-on-not-matched")
    )
    assert matched.code == 1 and "precision_fault" in matched.out, matched
    assert not_matched.code == 0 and "precision_fault" in not_matched.out, not_matched
    assert "Traceback" not in matched.err + not_matched.err


def test_compare_json_validates_and_fail_on_follows_the_verdict(ctx: dict[str, Any]) -> None:
    faithful, unfaithful = (
        _result(ctx, n) for n in ("compare-faithful-json", "compare-unfaithful-json")
    )
    [good] = _json_lines(faithful, "comparison.schema.json")
    [bad] = _json_lines(unfaithful, "comparison.schema.json")
    assert (good["verdict"], faithful.code) == ("faithful", 0), faithful  # --fail-on partial
    assert (bad["verdict"], unfaithful.code) == ("unfaithful", 1), (
        unfaithful
    )  # --fail-on unfaithful
    assert good["faults"]["reproduced"] is True and good["align"] == "step"
    assert bad["faults"]["full"]["label"] == bad["faults"]["proxy"]["label"] == "precision_fault"
    assert bad["faults"]["proxy"]["onset_step"] < bad["faults"]["full"]["onset_step"]  # fault_early
    assert 0 <= bad["fidelity"] < good["fidelity"] <= 1


def test_report_writes_the_file_and_gates(ctx: dict[str, Any]) -> None:
    html, markdown = (_result(ctx, n) for n in ("report-html", "report-markdown-fail-on"))
    work = Path(ctx["values"]["work"])
    assert html.code == 0 and html.out.strip() == str(work / "out" / "report.html"), html
    page = (work / "out" / "report.html").read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and "precision_fault" in page
    assert markdown.code == 1, markdown  # the run is a precision_fault
    gated = _result(ctx, "report-fail-on-partial")  # partial means partial or worse, as in compare
    assert gated.code == 1 and "unfaithful" in gated.out, gated
    assert "precision\\_fault" in (work / "report.md").read_text(encoding="utf-8")


def test_ingest_runs_show_rm_round_trip(ctx: dict[str, Any]) -> None:
    ingest, listed, shown, diagnosed, unknown, removed, after, again = _result(ctx, "round-trip")
    values = ctx["values"]
    full, proxy = values["full0_name"], values["faithful_name"]
    assert ingest.code == 0 and full in ingest.out and proxy in ingest.out, ingest
    assert listed.code == 0 and full in listed.out and proxy in listed.out, listed
    assert shown.code == 0 and shown.out.startswith(f"run {full}-"), shown
    assert "metrics (canonical" in shown.out and f"group: {GROUP}" in shown.out, shown
    [d] = _json_lines(diagnosed, "diagnosis.schema.json")
    assert diagnosed.code == 0 and d["source"] == full and d["label"] == "precision_fault"
    _assert_bad_input(unknown, "nosuchrun")
    assert removed.code == 0 and removed.out.startswith(f"removed {full}-"), removed
    assert after.code == 0 and full not in after.out and proxy in after.out, after
    _assert_bad_input(again, full)
