"""Tail a text file that grows: JSON Lines, CSV/TSV, console logs.

Each :meth:`LineTail.poll` reads from the byte offset where the last one stopped up to the last
newline (an unfinished last line waits for the next tick), and decodes those lines with the
offline reader of the file's format (:mod:`proxydiag.ingest.tail.chunk`). A CSV's header is
kept and put before every chunk. A console log's chunks are numbered as lines of the file
and read with the parse state the earlier chunks left (the HF Trainer's running index of log
lines, an open table's header), so they read as the whole file does. A file that was
truncated (shorter than the offset) or replaced (another inode: log rotation) is read again
from its start; one that vanished is a warning and the tail waits for it to come back.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxydiag.ingest import ReadContext
from proxydiag.ingest.contract import Reader
from proxydiag.ingest.tail.chunk import Rows, decode, vanished

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
    #: complete lines read so far (the next chunk's first line is ``lines + 1``)
    lines: int = 0
    #: a console log's parse state, carried from chunk to chunk
    state: dict[str, Any] = field(default_factory=dict)

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
            # rotated or truncated: a new file
            self.offset, self.header, self.lines, self.state = 0, b"", 0, {}
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
        first_line = self.lines + 1
        self.lines += data.count(b"\n")
        if self.tabular and not self.header:
            cut = data.find(b"\n") + 1
            self.header, data = data[:cut], data[cut:]
        if not data.strip():
            return []
        options = dict(self.ctx.options)
        if self.reader.NAME == "console":
            options.update(console_state=self.state, first_line=first_line)
        # a chunk is never the whole file: its step-less lines never take their order as
        # steps (start-up banners and config prints would, before the first step line;
        # a chunk of only a run-end summary is not a restart at step 1). A console log with
        # no step anywhere is read in order by the final, offline diagnosis.
        if self.offset > end or self.reader.NAME == "console":
            options["continuation"] = True
        ctx = ReadContext(self.ctx.aliases, options)
        return decode(self.header + data, reader=self.reader, source=self.path, ctx=ctx)

    def to_state(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "inode": self.inode,
            "header": self.header.decode("utf-8", "replace"),
            "lines": self.lines,
            "parse_state": _plain(self.state),
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.offset, self.inode = int(state["offset"]), state.get("inode")
        self.header = str(state.get("header", "")).encode()
        self.lines = int(state.get("lines", 0))
        self.state = dict(state.get("parse_state", {}))


def _plain(state: dict[str, Any]) -> dict[str, Any]:
    """The parts of a parse state that JSON keeps as they are (a frame a dialect holds is
    rebuilt by the chunks after a restart)."""
    out = {}
    for key, value in state.items():
        try:
            if json.loads(json.dumps(value)) == value:
                out[key] = value
        except (TypeError, ValueError):
            continue
    return out
