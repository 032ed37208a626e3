"""The typer app and the helpers every command shares. Commands live in sibling modules."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from proxydiag.errors import ConfigError

app = typer.Typer(
    name="proxydiag",
    help="Failure taxonomy and proxy fidelity for RL post-training runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def sub_app(name: str, help_text: str) -> typer.Typer:
    """The command group ``proxydiag NAME COMMAND``; without a command it prints its help."""
    group = typer.Typer(help=help_text, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group


#: stdout for results, stderr for progress, warnings and errors
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def json_line(text: str, *, flush: bool = False) -> None:
    """One JSON Lines record on stdout, written as is: a fleet prints thousands, and rich's
    console costs ~0.5 ms a line (10,000 runs: 5.8 s of 7.6 s of ``runs -f json``). ``flush``
    for what a reader waits on (a live alert piped into another program)."""
    sys.stdout.write(text + "\n")
    if flush:
        sys.stdout.flush()


def output_dir(path: Path) -> Path:
    """``path`` given to ``-o DIR``; a file there is a one-line error, not "File exists"."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path}: is a file; -o needs a directory (created when missing)")
    return path


@app.callback()
def _root() -> None:
    """proxydiag: what went wrong in a run, and did the proxy reproduce it."""


@app.command()
def version() -> None:
    """Print proxydiag's version."""
    from proxydiag._version import __version__

    out.print(__version__)
