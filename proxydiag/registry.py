"""Registries: the one shape every extension point's plug-ins are listed in.

A registry is an ordered mapping from a plug-in's name to the plug-in: a module or object that
satisfies the extension point's :class:`typing.Protocol` (``Reader``, ``Detector``,
``FidelityTest``, ``Aligner``, ``Writer``, console ``Dialect``; see ``docs/architecture.md``).
An entry may be given as a dotted module path, imported on first use, so that ``import
proxydiag`` does not compile every reader; a path that does not import is an error naming the
plug-in, never a silent skip (the contract tests import every entry).

>>> import math
>>> reg = Registry("function", {"sqrt": math.sqrt, "json": "json"})
>>> reg.names()
('sqrt', 'json')
>>> reg["json"].__name__
'json'
>>> reg["cube"]
Traceback (most recent call last):
...
proxydiag.errors.PluginError: unknown function 'cube'; use one of sqrt, json
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar, cast

from proxydiag.errors import PluginError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named plug-ins of one kind, in order (the order is the order they are tried or run).

    Parameters
    ----------
    kind
        What a plug-in is, for messages ("reader", "detector", ...).
    entries
        Name -> plug-in, or name -> dotted path of a module that is the plug-in.
    """

    def __init__(self, kind: str, entries: Mapping[str, T | str]) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = dict(entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[T]:
        """The plug-ins in order (each imported on first use)."""
        return (self[name] for name in list(self._entries))

    def __getitem__(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise PluginError(
                f"unknown {self.kind} {name!r}; use one of {', '.join(self._entries)}"
            ) from None
        if isinstance(entry, str):
            entry = self._entries[name] = self._load(name, entry)
        return entry

    def names(self) -> tuple[str, ...]:
        """The registered names, in order."""
        return tuple(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """``(name, plug-in)`` pairs in order, every plug-in loaded."""
        return [(name, self[name]) for name in list(self._entries)]

    def register(self, name: str, entry: T | str, *, first: bool = False) -> None:
        """Add (or replace) a plug-in; ``first`` puts it before the others (tried first)."""
        if not name:
            raise PluginError(f"a {self.kind} needs a name")
        rest = {k: v for k, v in self._entries.items() if k != name}
        self._entries = {name: entry, **rest} if first else {**rest, name: entry}

    def _load(self, name: str, path: str) -> T:
        try:
            return cast(T, importlib.import_module(path))
        except ImportError as exc:
            raise PluginError(f"{self.kind} {name!r}: cannot import {path} ({exc})") from exc
