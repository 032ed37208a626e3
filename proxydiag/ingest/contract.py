"""The reader contract: what a reader is, and what every reader is given.

A reader is a module (or any object) with ``NAME``, ``can_read(source) -> bool`` (cheap: it
looks at names and the first bytes, never reads a whole file) and ``read(source, ctx) ->
list[Run]`` (every run in the source, each built with :func:`proxydiag.run.build.build_run`).
Readers are listed in :data:`proxydiag.ingest.READERS`; the contract test
(``tests/testing/test_contracts.py``) runs the common checks on every registered one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import polars as pl

from proxydiag.events import Event
from proxydiag.metrics import AliasTable
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.run.sidecar import sidecar_for


@dataclass(frozen=True)
class ReadContext:
    """What every reader gets besides the source."""

    aliases: AliasTable = field(default_factory=AliasTable.default)
    options: dict[str, Any] = field(default_factory=dict)


def source_run(
    raw: pl.DataFrame,
    source: Path,
    ctx: ReadContext,
    *,
    fmt: str,
    name: str,
    attrs: Mapping[str, Any],
    sidecar_of: Path | None,
    events: list[Event] | None = None,
    monotonic: bool = False,
) -> Run:
    """The run a reader of ``fmt`` read from ``source``, with the context's aliases and the
    sidecar of ``sidecar_of`` (:func:`~proxydiag.run.sidecar.sidecar_for`; None: no sidecar),
    through :func:`~proxydiag.run.build.build_run`."""
    return build_run(
        raw,
        name=name,
        source=source,
        fmt=fmt,
        aliases=ctx.aliases,
        attrs=attrs,
        events=events,
        sidecar=None if sidecar_of is None else sidecar_for(sidecar_of),
        monotonic=monotonic,
    )


@runtime_checkable
class Reader(Protocol):
    """One source format: recognise it cheaply, read every run in it."""

    NAME: str

    def can_read(self, source: str | Path) -> bool: ...

    def read(self, source: str | Path, ctx: ReadContext) -> list[Run]: ...
