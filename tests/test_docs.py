"""The docs' code runs, and every path the docs and the code cite is in the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", ["architecture.md"])
def test_a_page_s_python_runs(page: str, tmp_path: Path) -> None:
    """The worked examples of a page run in order, as one script, in a fresh process."""
    code = "\n".join(_python_blocks(DOCS / page))
    assert code
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.splitlines()
    assert out[0] == "grad_norm [0.9, inf, 2.5, 2.4]"  # the kv reader: inf kept
    assert out[1].startswith("healthy") and "lr_jump" in out[1]  # the detector ran
    assert out[2] == "callback None 0"  # the trainer hook on a healthy run: quiet
    assert out[3] == "{'env/return_mean': 'reward'}"  # the alias


def test_citations_point_into_the_repository() -> None:
    """Code and docs cite docs/*.md (with an existing heading) and no file outside the repo."""
    files = [p for p in ROOT.glob("proxydiag/**/*") if p.suffix in (".py", ".toml")]
    files += [*DOCS.glob("*.md"), ROOT / "README.md", *ROOT.glob("tests/**/*.py")]
    outside = re.compile(r"\.\./shared(?!/realruns)|ARCHITECTURE\.md|REFERENCE-\w+\.md")
    cited = re.compile(r"docs/(\w+)\.md(?:#([\w-]+))?")
    bad = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        bad += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in outside.finditer(text)]
        for m in cited.finditer(text):
            page = DOCS / f"{m.group(1)}.md"
            if not page.exists() or (m.group(2) and m.group(2) not in _anchors(page)):
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not bad, "\n".join(bad)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page (repeated headings numbered -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out
