"""The light coercion (``proxydiag/cli/_coerce.py``) gives what typer's own gives, value or
message, for every parameter of every command and values of each parameter's type: plain,
odd (``007``, ``+5``, ``1_000``, ``inf``, a wrong case), out of range and wrong."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import typer.main

pytest.importorskip("typer._coercion", reason="a typer that coerces through pydantic")

from typer._click import Context
from typer._coercion import build_runtime_param
from typer.core import _TyperParameter

from proxydiag.cli import app
from proxydiag.cli._coerce import Light

_INTS = ["0", "7", "-3", "007", "+5", "1_000", " 4", "abc", "1.5", "", "9" * 25, "100000"]
_FLOATS = ["0.5", "1e-3", "1E5", "-2", "3", ".5", "5.", "inf", "nan", "abc", "1_0.5", "0.1" * 3]
_TEXTS = ["x", "", "a b", "runs:/abc", "-"]


def _params() -> list[tuple[str, Any, Any]]:
    found: list[tuple[str, Any, Any]] = []

    def walk(command: Any, path: str) -> None:
        for param in command.params:
            if isinstance(param, _TyperParameter):
                found.append((f"{path} {param.name}", command, param))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "proxydiag")
    return found


def _values(annotation: Any, param: Any) -> list[Any]:
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        singles = _values(item, param)
        return [tuple(singles[:2]), tuple(singles), (), singles[0]]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        names = [str(m.value) for m in annotation]
        return [*names, *(n.upper() for n in names), "nope", *list(annotation)]
    if annotation is int:
        return [*_INTS, 3, True, 2.0]
    if annotation is float:
        return [*_FLOATS, 0.25, 2]
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return [*_TEXTS, Path("a/b.jsonl"), str(Path(__file__)), str(Path(__file__).parent)]
    return [*_TEXTS, "true", "0", 1, True]


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        return ("value", repr(runtime.coerce(value, param=param, ctx=ctx)))  # nan == nan
    except Exception as exc:  # the message a user reads
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        return (type(exc).__name__, text)


@pytest.mark.parametrize(("where", "command", "param"), _params(), ids=lambda x: str(x))
def test_light_coercion_gives_what_typer_gives(where: str, command: Any, param: Any) -> None:
    ctx = Context(command, info_name=where.split()[-2] if " " in where else where)
    descriptor = param.type_descriptor
    if descriptor.file_annotation is not None:
        pytest.skip("opened as a file by typer's own coercion")
    light, own = Light(descriptor, build_runtime_param), build_runtime_param(descriptor)
    values = [None, param.default, *_values(descriptor.annotation, param)]
    for value in values:
        assert _outcome(light, value, param, ctx) == _outcome(own, value, param, ctx), (
            where,
            value,
        )


def test_a_plain_command_line_builds_no_pydantic_adapter() -> None:
    """What makes the start fast: the diagnose options of a usual call stay off pydantic."""
    built: list[str] = []

    def spy(descriptor: Any) -> Any:
        built.append(repr(descriptor.annotation))
        return build_runtime_param(descriptor)

    command = typer.main.get_command(app)
    diagnose = command.commands["diagnose"]  # type: ignore[attr-defined]
    ctx = Context(diagnose, info_name="diagnose")
    for param in diagnose.params:
        flag = param.type_descriptor.annotation is bool and isinstance(param.default, bool)
        if isinstance(param, _TyperParameter) and not flag:  # typer coerces no flag's bool
            Light(param.type_descriptor, spy).coerce(param.default, param=param, ctx=ctx)
    assert built == []
    # and a value that needs typer's rules still gets them
    workers = next(p for p in diagnose.params if p.name == "workers")
    with pytest.raises(Exception, match="1"):
        Light(workers.type_descriptor, spy).coerce("0", param=workers, ctx=ctx)
    assert built == ["<class 'int'>"]
