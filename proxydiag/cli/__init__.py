"""Command line: ``proxydiag ...``. Thin: parses arguments, calls the API, prints results.

Exit codes: 0 done; 1 only when ``--fail-on`` matched; 2 bad input or usage (one line on
stderr naming the file and what to do, never a traceback).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

import typer

from proxydiag.cli._app import app, err
from proxydiag.cli._coerce import install
from proxydiag.cli._options import modernise
from proxydiag.errors import ProxydiagError

#: command modules; each registers its commands on ``app``
COMMAND_MODULES = (
    "ingest",
    "diagnose",
    "compare",
    "report",
    "dashboard",
    "mlflow",
    "synth",
    "demo",
    "bench",
    "lab",
    "proxy",
    "watch",
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"proxydiag.cli.{_name}")


def _show_warning(
    message: Any, category: Any, filename: str, lineno: int, *a: Any, **k: Any
) -> None:
    text = str(message).splitlines()[0] if str(message) else category.__name__
    err.print(f"warning: {text}", markup=False)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``proxydiag`` script."""
    warnings.showwarning = _show_warning
    warnings.filterwarnings("default", category=UserWarning, module="proxydiag")
    install()  # plain values coerced without importing pydantic (65 ms of CPU)
    words, said = modernise(sys.argv[1:] if argv is None else list(argv))
    for line in said:
        err.print(f"warning: {line}", markup=False)
    try:
        rc = app(args=words, standalone_mode=False, prog_name="proxydiag")
    except ProxydiagError as exc:
        _fail(str(exc))
    except _with_click(typer.Abort, "Abort"):
        _fail("aborted", code=130)
    except _with_click(typer.TyperException, "ClickException") as exc:
        usage = hasattr(exc, "ctx") and getattr(exc, "exit_code", None) == 2
        if usage and type(exc).__name__ != "NoArgsIsHelpError":  # not a bare command's help
            # (typer vendors click: its UsageError is not click's, so it is told by shape)
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else _command(argv)
            message = exc.format_message().replace(": Value error, ", ": ")  # type: ignore[attr-defined]
            _fail(f"{message} (see '{where} --help')")
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2) or 2)
    except KeyboardInterrupt:
        _fail("interrupted", code=130)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _fail(f"{where}{exc.strerror or exc}")
    sys.exit(rc if isinstance(rc, int) else 0)


def _with_click(kind: type[BaseException], name: str) -> tuple[type[BaseException], ...]:
    """typer's exception class, and click's ``name`` when click is loaded: a typer that runs
    on click imports it, one that vendors it (0.2x) does not, and importing click only to
    catch what nothing raises costs 15 ms of every start."""
    click = sys.modules.get("click")
    return (kind,) if click is None else (kind, getattr(click, name))


def _command(argv: list[str] | None) -> str:
    """``proxydiag CMD`` for the command ``argv`` names (an error without a context, such as
    an option missing its value, still points at the right ``--help``)."""
    import typer.main

    words = sys.argv[1:] if argv is None else argv
    commands = getattr(typer.main.get_command(app), "commands", {})
    name = next((w for w in words if not w.startswith("-")), "")
    return f"proxydiag {name}" if name in commands else "proxydiag"


def _fail(message: str, code: int = 2) -> None:
    line = " ".join(message.split()) or "error"
    err.print(f"error: {line}", markup=False)
    sys.exit(code)
