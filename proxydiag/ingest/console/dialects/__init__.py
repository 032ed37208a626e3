"""Console dialects: one module per framework's line shapes, behind one registry.

A dialect satisfies :class:`Dialect`: ``NAME``, ``SNIFF`` (a compiled pattern that finds one of
its lines in a file's first MB) and ``extract(chunk) -> Extract`` (its records from a block of
lines, with polars string expressions). The console reader runs every dialect over every
block, in :data:`DIALECTS` order.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from proxydiag.ingest.console._records import Chunk, Extract
from proxydiag.registry import Registry

__all__ = ["DIALECTS", "Chunk", "Dialect", "Extract"]


@runtime_checkable
class Dialect(Protocol):
    """One framework's console lines."""

    NAME: str
    SNIFF: re.Pattern[str]

    def extract(self, chunk: Chunk) -> Extract: ...


#: dialect name -> module (imported on first use)
DIALECTS: Registry[Dialect] = Registry(
    "console dialect",
    {
        "megatron": "proxydiag.ingest.console.dialects.megatron",
        "deepspeed": "proxydiag.ingest.console.dialects.deepspeed",
        "dschat": "proxydiag.ingest.console.dialects.dschat",
        "fairseq": "proxydiag.ingest.console.dialects.fairseq",
        "verl": "proxydiag.ingest.console.dialects.verl",
        "dict": "proxydiag.ingest.console.dialects.pydict",
        "mindspeed": "proxydiag.ingest.console.dialects.mindspeed",
        "pipes": "proxydiag.ingest.console.dialects.pipes",
        "table": "proxydiag.ingest.console.dialects.table",
        "traceback": "proxydiag.ingest.console.dialects.traceback",
        # last: tables of numbers under a header, then the generic metric-line grammar,
        # read the lines no dialect above claims
        "columns": "proxydiag.ingest.console.dialects.columns",
        "grammar": "proxydiag.ingest.console.dialects.grammar",
    },
)
