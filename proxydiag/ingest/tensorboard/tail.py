"""Tail a TensorBoard logdir that grows: new event files, and records appended to open ones.

Per event file the tail keeps the offset after the last complete record; each poll frames the
bytes after it (:func:`proxydiag.ingest.tensorboard._records.frame`, every CRC checked), keeps the
complete records, and leaves a record cut by the end of the file (still being written) for the next
tick. The complete records are decoded by the offline reader
(:mod:`proxydiag.ingest.tensorboard`). Event files that appear later are picked up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from proxydiag.ingest import ReadContext
from proxydiag.ingest import tensorboard as tb  # the reader module
from proxydiag.ingest.tail.chunk import Rows, decode, vanished
from proxydiag.ingest.tensorboard._records import frame

#: the part of an event file's name that marks it (``events.out.tfevents.*``)
MARK = "tfevents"


@dataclass
class TensorBoardTail:
    """Event files of one logdir (or one event file), each read from its own offset."""

    path: Path
    ctx: ReadContext
    offsets: dict[str, int] = field(default_factory=dict)
    missing: bool = False

    def files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        if not self.path.is_dir():
            self.missing = vanished(self.path, self.missing)
            return []
        self.missing = False
        return sorted(p for p in self.path.iterdir() if MARK in p.name and p.is_file())

    def poll(self) -> Rows:
        """The scalar points of the records completed since the last poll."""
        rows: Rows = []
        for file in self.files():
            offset = self.offsets.get(file.name, 0)
            try:
                with open(file, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except FileNotFoundError:
                continue
            if not data:
                continue
            framing = frame(np.frombuffer(data, dtype=np.uint8))
            if framing.starts.size == 0:
                continue
            end = int(framing.starts[-1] + framing.lengths[-1] + 4)  # after the data CRC
            self.offsets[file.name] = offset + end
            rows.extend(decode(data[:end], reader=tb, source=file, ctx=self.ctx))
        rows.sort(key=lambda r: r[0])
        return rows

    def to_state(self) -> dict[str, Any]:
        return {"offsets": dict(self.offsets)}

    def restore(self, state: dict[str, Any]) -> None:
        self.offsets = {str(k): int(v) for k, v in state.get("offsets", {}).items()}
