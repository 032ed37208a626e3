"""Option groups: options several commands share, declared once as a dataclass.

A command takes the group as one parameter (``fleet: Fleet = Fleet()``) and is registered with
``@command(app)`` instead of ``@app.command()``; :func:`grouped` shows
typer the group's fields in its place, as options of their own (names, help and defaults from
the fields' ``Annotated`` types), and calls the command with the group built from them. Help,
option order and defaults are those of the options written out one by one.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import typer

Command = Callable[..., None]


def grouped(command: Command) -> Command:
    """``command`` with each parameter typed as a dataclass spread into that class's fields.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Size:
    ...     width: int = 1
    ...     height: int = 2
    >>> @grouped
    ... def show(name: str, size: Size = Size()) -> None:
    ...     print(name, size)
    >>> list(inspect.signature(show).parameters)
    ['name', 'width', 'height']
    >>> show(name="box", width=3, height=4)
    box Size(width=3, height=4)
    """
    hints = get_type_hints(command, include_extras=True)
    groups: dict[str, Any] = {}
    params: list[inspect.Parameter] = []
    for param in inspect.signature(command).parameters.values():
        kind = hints[param.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            groups[param.name] = kind
            fields = get_type_hints(kind, include_extras=True)
            params += [
                inspect.Parameter(f.name, param.kind, default=f.default, annotation=fields[f.name])
                for f in dataclasses.fields(kind)
            ]
        else:
            params.append(param.replace(annotation=kind))

    @functools.wraps(command)
    def spread(**options: Any) -> None:
        for name, group in groups.items():
            names = [f.name for f in dataclasses.fields(group)]
            options[name] = group(**{n: options.pop(n) for n in names})
        command(**options)

    spread.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    spread.__annotations__ = {p.name: p.annotation for p in params}
    return spread


def command(parent: typer.Typer, name: str | None = None) -> Callable[[Command], Command]:
    """``@parent.command(name)`` for a command that takes option groups (:func:`grouped`)."""

    def register(function: Command) -> Command:
        spread = grouped(function)
        parent.command(name)(spread)
        return spread

    return register
