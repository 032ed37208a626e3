"""Python tracebacks: where a log stops on an exception.

No records of its own: the line numbers of ``Traceback (most recent call last):`` go into the
parse state (``state["tracebacks"]``), and :func:`proxydiag.ingest.console._crash.crash_events`
reads them against the overflows just before. A traceback alone does not make a log
readable (its ``SNIFF`` never matches).
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console._records import Chunk, Extract, empty_records

NAME = "traceback"
SNIFF = re.compile(r"(?!)")  # never: a traceback is not a training log

_MARK = "Traceback (most recent call last):"


def extract(chunk: Chunk) -> Extract:
    """Note the traceback lines of one block; no records."""
    hits = chunk.lines.filter(pl.col("text").str.contains(_MARK, literal=True))["line"].to_list()
    if hits:
        chunk.state.setdefault("tracebacks", []).extend(int(h) for h in hits)
    return Extract(empty_records())
