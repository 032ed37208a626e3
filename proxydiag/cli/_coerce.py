"""Command-line values coerced without pydantic where typer's own rules need none of it.

typer 0.2x coerces every value of a command line through a pydantic ``TypeAdapter``, built on
first use: importing pydantic and building the adapters of a command's options costs ~65 ms
of CPU, a tenth of ``proxydiag diagnose FILE``'s start. Most values need none of it: a string
is the string; a path or a choice goes through typer's own ``coerce_cli_path`` /
``coerce_cli_choice`` (the adapter only calls them); an integer or a float written plainly is
``int(text)`` / ``float(text)``. :func:`install` has typer build a :class:`Light` coercion
for each parameter, which does these directly and hands anything else (a value that does not
parse or is out of range, a bool given as text, a clamped number, a tuple, a date, a custom
parser) to typer's own coercion, built then: results and messages stay typer's. On a typer
without this layer (before 0.2x) it changes nothing. ``tests/cli/test_coerce.py`` checks that
both give the same for every parameter of every command.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

#: integers and floats written plainly (anything else, e.g. ``1_000``, ``+5``, ``inf`` or a
#: very long number, goes to typer's coercion)
_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE]-?[0-9]{1,2})?")


class _Typer:
    """A value this module leaves to typer's own coercion."""


TYPER = _Typer()


def install() -> None:
    """Have typer coerce through :class:`Light` (the ``proxydiag`` entry point calls it)."""
    from typer import core

    build = getattr(core, "build_runtime_param", None)
    if build is None or getattr(build, "light", False):
        return  # a typer that runs on click coerces without pydantic; or installed already

    def light(descriptor: Any) -> Any:
        if descriptor.file_annotation is not None:  # opens files: typer's, no pydantic
            return build(descriptor)
        return Light(descriptor, build)

    light.light = True  # type: ignore[attr-defined]
    setattr(core, "build_runtime_param", light)  # what typer's parameters call  # noqa: B010


class Light:
    """A parameter's coercion: plain values here, the rest by typer's (see the module)."""

    def __init__(self, descriptor: Any, build: Any) -> None:
        self.descriptor = descriptor
        self._build = build
        self._typer: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = param.multiple or param.nargs == -1
        if value is None:  # as typer's RuntimeParam.coerce
            return () if multi else None
        if not (multi and isinstance(value, str)):
            done = coerce(
                self.descriptor.annotation, self.descriptor.parameter_info, value, param, ctx
            )
            if done is not TYPER:
                return done
        if self._typer is None:
            self._typer = self._build(self.descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)


def coerce(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    """``value`` coerced to ``annotation`` as typer would, or :data:`TYPER` to ask typer."""
    if get_origin(annotation) is list:
        (item,) = get_args(annotation) or (TYPER,)
        if not isinstance(value, list | tuple):
            return TYPER
        items = [coerce(item, info, v, param, ctx) for v in value]
        return TYPER if any(i is TYPER for i in items) else items
    if info.parser is not None or get_origin(annotation) is not None:
        return TYPER
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return _choice(list(annotation), info, value, ctx)
    if annotation is int or annotation is float:
        return _number(annotation, info, value)
    if annotation is str:
        return value if isinstance(value, str) else TYPER
    if isinstance(annotation, type) and issubclass(annotation, Path):
        from typer._param_types import coerce_cli_path

        try:
            return coerce_cli_path(
                value, info, path_type=info.path_type or annotation, param=param, ctx=ctx
            )
        except Exception:  # typer's coercion raises the same, with its message
            return TYPER
    return TYPER


def _choice(choices: list[Any], info: Any, value: Any, ctx: Any) -> Any:
    from typer._param_types import coerce_cli_choice

    try:
        return coerce_cli_choice(
            value, choices=choices, case_sensitive=info.case_sensitive, ctx=ctx
        )
    except Exception:
        return TYPER


def _number(kind: type, info: Any, value: Any) -> Any:
    if info.clamp:
        return TYPER
    if type(value) is kind:
        number = value
    elif isinstance(value, str) and (_INT if kind is int else _FLOAT).fullmatch(value):
        number = kind(value)
    else:
        return TYPER
    if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
        return TYPER
    return number
