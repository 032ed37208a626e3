"""One CLI grammar: every command's options walked; a meaning has one spelling everywhere."""

from __future__ import annotations

import enum
import re
import typing
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import typer.main

import proxydiag.cli as cli
from proxydiag.cli import main
from proxydiag.cli._options import (
    DEPRECATED,
    LabFault,
    Naming,
    PruneMethod,
    RunFormat,
    modernise,
)

CLI_DIR = Path(cli.__file__).parent


def _commands() -> list[tuple[str, Any]]:
    """(command path, click command) of every command and group with options of its own."""
    found: list[tuple[str, Any]] = []

    def walk(command: Any, path: str) -> None:
        found.append((path, command))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(cli.app), "")
    return found


def _options() -> list[tuple[str, Any]]:
    return [
        (path, p)
        for path, command in _commands()
        for p in command.params
        if p.param_type_name == "option"
    ]


def _long(option: Any) -> str:
    return next(o for o in option.opts if o.startswith("--"))


def test_the_walk_sees_every_command() -> None:
    paths = {path for path, _ in _commands()}
    assert {"diagnose", "compare", "report", "watch", "ingest", "lab suite", "bench watch"} <= paths
    assert len(_options()) > 100


def test_a_spelling_has_one_meaning_and_a_meaning_one_spelling() -> None:
    helps: dict[str, set[str]] = defaultdict(set)
    shorts: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    flags_of_name: dict[str, set[str]] = defaultdict(set)
    flags_of_help: dict[str, set[str]] = defaultdict(set)
    for _path, option in _options():
        flag = _long(option)
        helps[flag].add(option.help or "")
        shorts[flag].add(tuple(sorted(o for o in option.opts if not o.startswith("--"))))
        flags_of_name[option.name].add(flag)
        flags_of_help[option.help or ""].add(flag)
    # one spelling: one help line and the same short form wherever it appears
    assert {f: h for f, h in helps.items() if len(h) > 1} == {}
    assert {f: s for f, s in shorts.items() if len(s) > 1} == {}
    # one meaning (a parameter's name, a help line): one spelling
    assert {n: f for n, f in flags_of_name.items() if len(f) > 1} == {}
    assert {h: f for h, f in flags_of_help.items() if len(f) > 1} == {}
    # earlier spellings are no option of any command; what replaces them is one
    assert not set(DEPRECATED) & set(helps)
    assert {w for words in DEPRECATED.values() for w in words} <= set(helps)


def test_listed_choices_are_checked_by_the_parser() -> None:
    """A help line never lists choices by hand: a fixed set of values is an enum."""
    for path, option in _options():
        assert not re.search(r"\b\w+ \| \w+\b", option.help or ""), (path, _long(option))
    choice_flags = set()
    for _path, option in _options():
        kind = option.type_descriptor.annotation
        inner = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
        inner = [typing.get_args(a)[0] if typing.get_args(a) else a for a in inner]
        if any(isinstance(a, type) and issubclass(a, enum.Enum) for a in inner):
            choice_flags.add(_long(option))
    assert {"--format", "--align", "--precision", "--notify-min", "--method", "--fault"} <= (
        choice_flags
    )


def test_options_are_declared_in_one_module() -> None:
    """Commands take the declared option types; none declares an option of its own."""
    declaring = [
        p.name
        for p in sorted(CLI_DIR.glob("*.py"))
        if p.name != "_options.py" and "typer.Option(" in p.read_text(encoding="utf-8")
    ]
    assert declaring == []


def _required_arguments(command: Any) -> list[str]:
    return ["x" for p in command.params if p.param_type_name == "argument" and p.required]


@pytest.mark.parametrize(
    "path",
    sorted(
        path
        for path, command in _commands()
        if any(p.param_type_name == "option" and "--format" in p.opts for p in command.params)
    ),
)
def test_a_bad_format_is_a_usage_error_naming_the_choices(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = dict(_commands())[path]
    with pytest.raises(SystemExit) as exit_:
        main([*path.split(), "--format", "nope", *_required_arguments(command)])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "'nope' is not one of" in lines[0] and "Value error" not in lines[0], lines


def test_earlier_spellings_still_read_with_a_deprecation_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words, said = modernise(["lab", "run", "--out", "d", "--mlflow-uri", "http://h"])
    assert words == ["lab", "run", "--output", "d", "--log-to-mlflow", "--tracking-uri", "http://h"]
    assert len(said) == 2
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        main(["synth", "--out", str(out), "-s", "healthy", "--steps", "60", "-f", "jsonl"])
    assert exit_.value.code == 0
    err = capsys.readouterr().err
    assert "warning: --out is deprecated; use --output" in err
    assert any(out.rglob("*.jsonl"))


def test_the_choices_are_the_registries() -> None:
    from proxydiag.lab.injection import FAULTS
    from proxydiag.proxy.select import METHODS
    from proxydiag.synth.naming import FORMATS, NAMINGS

    assert [m.value for m in RunFormat] == list(FORMATS)
    assert [m.value for m in Naming] == list(NAMINGS)
    assert [m.value for m in PruneMethod] == list(METHODS)
    assert [m.value for m in LabFault] == list(FAULTS)
