"""Tail a text file that grows: JSON Lines, CSV/TSV, console logs.

Each :meth:`LineTail.poll` reads from the byte offset where the last one stopped up to the last
newline (an unfinished last line waits for the next tick), and decodes those lines with the
offline reader of the file's format (:mod:`proxydiag.ingest.tail._chunk`). A CSV's header is
kept and put before every chunk. A file that was truncated (shorter than the offset) or
replaced (another inode: log rotation) is read again from its start; one that vanished is a
warning and the tail waits for it to come back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxydiag.ingest import ReadContext
from proxydiag.ingest.contract import Reader
from proxydiag.ingest.tail._chunk import Rows, decode, vanished

#: bytes read per poll at most (a huge backlog is read over several ticks)
MAX_BYTES = 64 * 2**20


@dataclass
class LineTail:
    """A growing text file read by ``reader`` (a reader module of :mod:`proxydiag.ingest`)."""

    path: Path
    reader: Reader
    ctx: ReadContext
    offset: int = 0
    inode: int | None = None
    header: bytes = b""
    missing: bool = False

    @property
    def tabular(self) -> bool:
        return self.reader.NAME in ("csv", "wandb_csv")

    def poll(self) -> Rows:
        """The rows appended since the last poll."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.missing = vanished(self.path, self.missing)
            return []
        self.missing = False
        if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
            self.offset, self.header = 0, b""  # rotated or truncated: a new file
        self.inode = st.st_ino
        if st.st_size <= self.offset:
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(min(st.st_size - self.offset, MAX_BYTES))
        end = data.rfind(b"\n") + 1
        if end == 0:
            return []  # no complete line yet
        data = data[:end]
        self.offset += end
        if self.tabular and not self.header:
            cut = data.find(b"\n") + 1
            self.header, data = data[:cut], data[cut:]
        if not data.strip():
            return []
        # past the file's start a chunk continues the run: its step-less lines never take
        # their order as steps (a chunk of only a run-end summary is not a restart at step 1)
        ctx = self.ctx
        if self.offset > end:
            ctx = ReadContext(self.ctx.aliases, {**self.ctx.options, "continuation": True})
        return decode(self.header + data, reader=self.reader, source=self.path, ctx=ctx)

    def to_state(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "inode": self.inode,
            "header": self.header.decode("utf-8", "replace"),
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.offset, self.inode = int(state["offset"]), state.get("inode")
        self.header = str(state.get("header", "")).encode()
