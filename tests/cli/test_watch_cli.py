"""`proxydiag watch`: --replay JSON Lines against the schemas, exit codes, live tailing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from tests._paths import SAMPLES, SCHEMAS

SAMPLE = SAMPLES / "divergence" / "divergence-full-s1"


def _cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxydiag", *args],
        capture_output=True,
        text=True,
        check=False,
        **kw,
    )


def _validator(name: str) -> jsonschema.Draft202012Validator:
    resources = [
        (p.name, Resource.from_contents(json.loads(p.read_text())))
        for p in SCHEMAS.glob("watch_*.schema.json")
    ]
    registry: Registry[Any] = Registry().with_resources(resources)
    return jsonschema.Draft202012Validator(
        json.loads((SCHEMAS / name).read_text()), registry=registry
    )


def test_replay_prints_json_lines_valid_against_the_schemas() -> None:
    done = _cli(
        "watch",
        str(SAMPLE),
        "--replay",
        "--every",
        "10",
        "--format",
        "json",
        "--checkpoints",
        "100,150,200",
    )
    assert done.returncode == 0, done.stderr
    objs = [json.loads(line) for line in done.stdout.splitlines()]
    assert objs[-1]["final"] is True and objs[-1]["label"] == "loss_divergence"
    alerts = [o for o in objs if not o["final"]]
    assert alerts and alerts[0]["class"] == "loss_divergence"
    assert alerts[0]["raised_at_step"] >= alerts[0]["onset_step"]
    for o in alerts:
        _validator("watch_alert.schema.json").validate(o)
    _validator("watch_final.schema.json").validate(objs[-1])


def test_fail_on_exits_1_and_bad_options_exit_2() -> None:
    assert (
        _cli(
            "watch", str(SAMPLE), "--replay", "--every", "10", "--fail-on", "loss_divergence"
        ).returncode
        == 1
    )
    bad = _cli("watch", str(SAMPLE), "--replay", "--fail-on", "nonsense")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert _cli("watch", str(SAMPLE), "--replay", "--every", "0").returncode == 2


def test_live_watch_tails_a_growing_file_and_runs_the_hook(tmp_path: Path) -> None:
    """A JSONL file written while `watch` polls it: an alert, the hook with the alert on
    stdin and in its environment, then --until-done ends with the final diagnosis."""
    log = tmp_path / "metrics.jsonl"
    log.write_text("")
    hook_out = tmp_path / "hook.json"
    hook = (
        f"{sys.executable} -c \"import json,os,sys; open({str(hook_out)!r},'w').write("
        "json.dumps([json.load(sys.stdin), os.environ['PROXYDIAG_CLASS']]))\""
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxydiag",
            "watch",
            str(log),
            "--interval",
            "0.2",
            "--until-done",
            "--idle-timeout",
            "3",
            "--format",
            "json",
            "--on-alert",
            hook,
            "--store",
            str(tmp_path / "store"),
            "--precision",
            "bf16",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    with open(log, "a") as fh:
        for step in range(300):
            grad = 1.0 if step < 200 else float("inf")
            fh.write(json.dumps({"step": step, "grad_norm": grad, "loss": 2.0}) + "\n")
            if step % 50 == 49:
                fh.flush()
                time.sleep(0.3)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    assert [o["class"] for o in objs if not o["final"]] == ["gradient_overflow"]
    assert objs[-1]["final"] and objs[-1]["label"] == "gradient_overflow"
    alert, cls = json.loads(hook_out.read_text())
    assert cls == "gradient_overflow" and alert["onset_step"] == 200
    assert list((tmp_path / "store" / "watch").glob("*.json")), "no resume state kept"


@pytest.mark.parametrize("text", ["a;b", "$(rm -rf /)"])
def test_hook_never_goes_through_a_shell(tmp_path: Path, text: str) -> None:
    from proxydiag.watch.alerts import Alert
    from proxydiag.watch.live import run_hook

    out = tmp_path / "env.txt"
    run_hook(
        f'{sys.executable} -c "import os; '
        f"open({str(out)!r},'w').write(os.environ['PROXYDIAG_NAME'])\"",
        Alert("r", text, "loss_divergence", 1, 2, 0.5),
    )
    assert out.read_text() == text
