"""The README's "Ten lines of Python" run as written, and print what the README says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: numbers are statistics other modules may still tune: equal within this (absolute + relative)
ABS_TOL, REL_TOL = 0.02, 0.05
NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def _section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## Ten lines of Python", 1)[1].split("\n## ", 1)[0]


def _block(section: str, lang: str) -> str:
    match = re.search(rf"```{lang}\n(.*?)```", section, re.DOTALL)
    assert match, f"no ```{lang} block in the README's 'Ten lines of Python'"
    return match.group(1)


def _same(printed: str, shown: str) -> bool:
    """Equal words; numbers equal within ABS_TOL + REL_TOL of the README's value."""
    if NUMBER.sub("#", printed) != NUMBER.sub("#", shown):
        return False
    pairs = zip(NUMBER.findall(printed), NUMBER.findall(shown), strict=True)
    return all(abs(float(p) - float(s)) <= ABS_TOL + REL_TOL * abs(float(s)) for p, s in pairs)


def test_same_helper() -> None:
    assert _same("faithful 0.97", "faithful 0.98")
    assert not _same("partial 0.98", "faithful 0.98")
    assert not _same("faithful 0.80", "faithful 0.98")


def test_the_ten_lines_run_and_print_what_the_readme_shows() -> None:
    section = _section()
    code, shown = _block(section, "python"), _block(section, "text")
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    printed, expected = proc.stdout.splitlines(), shown.strip().splitlines()
    assert len(printed) == len(expected), proc.stdout
    # the labels exactly: failure class, onset, root cause, verdict
    assert (
        printed[0].split()[::2] == expected[0].split()[::2] == ["precision_fault", "mismatch_climb"]
    )
    assert printed[1].split()[0] == expected[1].split()[0] == "faithful"
    for line, want in zip(printed, expected, strict=True):
        assert _same(line, want), f"printed {line!r}, README shows {want!r}"
