"""Configuration machinery shared by the diagnose, compare and alias settings.

* :func:`read_toml` reads a TOML file; a missing or malformed file is one
  :class:`~proxydiag.errors.ConfigError` line naming the file (and the line of a syntax error).
* :func:`ranged` declares a dataclass parameter with its allowed range in the field's metadata;
  :func:`check_ranges` (called from ``__post_init__``) enforces every declared range and names
  the range in its message. A bound may name another field (``hi="faithful_score"``).
* :func:`override` applies a table of overrides to a frozen dataclass, checking keys and types.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Window:
...     window_steps: int = ranged(40, lo=2, hi=1000)
...     def __post_init__(self) -> None:
...         check_ranges(self, section="demo")
>>> override(Window(), {"window_steps": 80}, section="demo", origin="demo.toml").window_steps
80
>>> Window(window_steps=1)
Traceback (most recent call last):
...
proxydiag.errors.ConfigError: [demo] window_steps = 1 is out of range; use a value in [2, 1000]
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from proxydiag.errors import ConfigError, where

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
D = TypeVar("D", bound="DataclassInstance")
Bound = float | str  # a number, or the name of another field of the same dataclass

_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def read_toml(
    path: str | Path, *, kind: str = "config file", option: str = "--config"
) -> dict[str, Any]:
    """The tables of a TOML file.

    ``kind`` and ``option`` word the message for a missing file (``alias file``, ``--aliases``).
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: {kind} not found; check the {option} path") from exc
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        place = where(path, int(found.group(1))) if found else str(path)
        raise ConfigError(f"{place}: invalid TOML ({exc}); fix the file") from exc


def ranged(default: T, *, lo: Bound, hi: Bound) -> T:
    """A dataclass field with a default and its allowed range ``[lo, hi]``."""
    found: T = dataclasses.field(default=default, metadata={"range": (lo, hi)})
    return found


def check_ranges(obj: DataclassInstance, *, section: str) -> None:
    """Raise :class:`ConfigError` for the first field of ``obj`` outside its declared range."""
    for f in dataclasses.fields(obj):
        bounds = f.metadata.get("range")
        if bounds is None:
            continue
        lo, hi = (getattr(obj, b) if isinstance(b, str) else b for b in bounds)
        value = getattr(obj, f.name)
        if not lo <= value <= hi:
            raise ConfigError(
                f"[{section}] {f.name} = {value!r} is out of range; use a value in [{lo}, {hi}]"
            )


def override(base: D, table: Mapping[str, Any], *, section: str, origin: str) -> D:
    """A copy of the dataclass ``base`` with the values of ``table`` (keys and types checked,
    ranges by the dataclass itself); every message starts with ``origin``."""
    known = {f.name for f in dataclasses.fields(base)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(
                f"{origin}: unknown key {section}.{key}; known: {', '.join(sorted(known))}"
            )
        values[key] = coerce(value, getattr(base, key), where=f"{origin}: {section}.{key}")
    try:
        return dataclasses.replace(base, **values)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from exc


def coerce(value: Any, default: Any, *, where: str) -> Any:
    """``value`` as the type of ``default`` (tuple of strings, table of numbers, bool, int,
    float).

    >>> coerce(3, 0.5, where="x"), coerce(["a"], ("b",), where="x"), coerce(True, False, where="x")
    (3.0, ('a',), True)
    """
    if isinstance(default, tuple):
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings")
        return tuple(value)
    if isinstance(default, dict):
        if not isinstance(value, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()
        ):
            raise ConfigError(f"{where} must be a table of numbers")
        return {**default, **{str(k): float(v) for k, v in value.items()}}
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {value!r}")
        return value
    if isinstance(value, bool):
        raise ConfigError(f"{where} must be a number, not {value!r}")
    if isinstance(default, int) and isinstance(value, int):
        return value
    if isinstance(default, float) and isinstance(value, int | float):
        return float(value)
    raise ConfigError(f"{where} must be {type(default).__name__}, not {value!r}")
