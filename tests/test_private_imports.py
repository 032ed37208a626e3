"""Private means private: ``proxydiag.X._y`` (a module or a name) is imported only inside X.

X is the package that holds the private part. The package and the benchmarks are checked; the
tests may reach into a package's internals to test them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import proxydiag

PACKAGE = Path(proxydiag.__file__).parent
ROOT = PACKAGE.parent


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _owner(dotted: str) -> str | None:
    """The package a private part of ``dotted`` belongs to (None when nothing is private)."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every proxydiag module or name the file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "proxydiag"]


def violations(files: list[Path], root: Path = ROOT) -> list[str]:
    """One line per import of a private part from outside its package; ``root`` holds the
    ``proxydiag`` folder."""
    bad: list[str] = []
    for path in files:
        in_package = path.is_relative_to(root / "proxydiag")
        here = _module_name(path, root) if in_package else "benchmarks"
        # a module's own package is "inside"; a package's __init__ is inside itself
        inside = here if path.name == "__init__.py" else here.rpartition(".")[0]
        for line, name in _imports(path):
            owner = _owner(name)
            if owner is None:
                continue
            if not (
                root / Path(*owner.split("."))
            ).is_dir():  # a private name of a module: its package owns it
                owner = owner.rpartition(".")[0]
            if not (inside == owner or inside.startswith(owner + ".")):
                where = path.relative_to(root) if path.is_relative_to(root) else path
                bad.append(f"{where}:{line}: imports {name} (private to {owner})")
    return bad


def test_no_private_part_is_imported_outside_its_package() -> None:
    files = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(files) > 100
    assert violations(files) == []


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    """The check itself, on a package laid out like this one."""
    for folder in ("proxydiag/report", "proxydiag/diagnose/detectors"):
        (tmp_path / folder).mkdir(parents=True)
    files = {
        "proxydiag/report/page.py": "from proxydiag.diagnose._stats import runs_of\n",
        "proxydiag/report/_own.py": "import proxydiag.report._other\n",  # its own package
        "proxydiag/diagnose/detectors/one.py": "from proxydiag.diagnose import _stats\n",
        "proxydiag/diagnose/view.py": "from proxydiag.run.build import _segments\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    found = violations([tmp_path / name for name in files], root=tmp_path)
    assert found == [
        "proxydiag/report/page.py:1: imports proxydiag.diagnose._stats.runs_of "
        "(private to proxydiag.diagnose)",
        "proxydiag/diagnose/view.py:1: imports proxydiag.run.build._segments "
        "(private to proxydiag.run)",
    ]
