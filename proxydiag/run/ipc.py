"""A :class:`~proxydiag.run.Run` as bytes: the canonical frame as Arrow IPC plus its metadata as
JSON, the form a run travels in between processes (a fleet worker and its driver, a Ray node).

A :class:`RunBlob` pickles as two byte strings, so sending a run costs one Arrow buffer and a
small JSON text instead of a pickled polars frame.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import polars as pl

from proxydiag.events import Event
from proxydiag.run import Run


@dataclass(frozen=True)
class RunBlob:
    """A run on its way between processes: Arrow IPC bytes plus JSON metadata.

    NaN and ±inf values travel as they are (Arrow keeps the IEEE bits).

    >>> from proxydiag.run.build import build_run
    >>> run = build_run(pl.DataFrame({"step": [1, 2], "key": ["loss"] * 2,
    ...                               "value": [0.5, float("inf")]}),
    ...                 name="r", source="s", fmt="csv")
    >>> back = RunBlob.of(run).run()
    >>> back.id == run.id, back.frame.equals(run.frame)
    (True, True)
    """

    ipc: bytes
    meta: str

    @classmethod
    def of(cls, run: Run) -> RunBlob:
        """``run`` as bytes (its frame, name, attrs, mapping and events; not ``superseded``)."""
        buffer = io.BytesIO()
        run.frame.write_ipc(buffer, compression="lz4")
        meta = {
            "name": run.name,
            "attrs": run.attrs,
            "mapping": run.mapping,
            "events": [e.to_dict() for e in run.events],
        }
        return cls(buffer.getvalue(), json.dumps(meta, default=str))

    def run(self) -> Run:
        """The run these bytes hold."""
        meta = json.loads(self.meta)
        frame = pl.read_ipc(io.BytesIO(self.ipc))
        return Run(
            frame,
            meta["name"],
            meta["attrs"],
            meta["mapping"],
            [Event(**e) for e in meta["events"]],
        )
