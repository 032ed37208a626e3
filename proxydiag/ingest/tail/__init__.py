"""Tailing readers: sources that grow while a run trains (``proxydiag watch``).

A tail's ``poll()`` returns the ``(step, {key: value})`` rows appended since the last poll,
reading only the new bytes; ``to_state()``/``restore()`` keep its offsets across restarts.
Formats: TensorBoard logdirs and event files (:mod:`.tensorboard`), JSON Lines, CSV/TSV and
console logs (:mod:`.lines`), MLflow runs on a server or in a file store (:mod:`.mlflow`).
Each decodes with the offline reader of its format. A tail with an ``ended`` attribute knows
when its run has finished (MLflow's run status).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from proxydiag.errors import UnknownFormatError
from proxydiag.ingest import ReadContext, detect
from proxydiag.ingest.tail.chunk import Rows

#: a growing file whose first this many bytes tell no format is not waited for any longer
SNIFF_BYTES = 2**20
#: formats a growing file may have (the offline reader's NAME)
LINE_FORMATS = ("jsonl", "csv", "wandb_csv", "console")


class Tail(Protocol):
    def poll(self) -> Rows: ...

    def to_state(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...


def open_tail(source: str | Path, ctx: ReadContext | None = None) -> Tail:
    """The tail of a TensorBoard logdir / event file, or a JSONL, CSV or console file.

    Raises :class:`~proxydiag.errors.UnknownFormatError` naming the source otherwise.
    """
    ctx = ctx or ReadContext()
    if str(source).startswith("runs:/"):
        from proxydiag.ingest.mlflow.tail import MlflowRunTail
        from proxydiag.tracking import resolve_tracking_uri

        return MlflowRunTail(resolve_tracking_uri(), str(source)[len("runs:/") :].strip("/"))
    path = Path(source)
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return Pending(path, ctx)  # not written yet: its format is found once it has data
    try:
        return _known(path, ctx)
    except UnknownFormatError:
        if path.is_dir() or path.stat().st_size <= SNIFF_BYTES:
            # a logdir made before its first event file; a log whose first lines (a model
            # loading) tell no format yet
            return Pending(path, ctx)
        raise


def _known(path: Path, ctx: ReadContext) -> Tail:
    from proxydiag.ingest.mlflow.tail import MlflowFileTail
    from proxydiag.ingest.tail.lines import LineTail
    from proxydiag.ingest.tensorboard.tail import MARK, TensorBoardTail

    if path.is_dir() and (path / "meta.yaml").is_file() and (path / "metrics").is_dir():
        return MlflowFileTail(path)  # a run folder of an MLflow file store
    if (path.is_dir() and any(MARK in p.name for p in path.iterdir())) or MARK in path.name:
        return TensorBoardTail(path, ctx)
    if path.is_file():
        reader = detect(path)
        if reader is not None and reader.NAME in LINE_FORMATS:
            return LineTail(path, reader, ctx)
    raise UnknownFormatError(
        f"{path}: cannot watch it; give a TensorBoard logdir, or a JSONL, CSV or console log "
        "file, an MLflow run folder or runs:/ID"
    )


class Pending:
    """A source that does not exist yet, or is empty (a file of no bytes, a folder with no
    event file or run yet): its format is detected on the first poll that finds data (a file
    whose first lines do not tell its format yet waits too)."""

    def __init__(self, path: Path, ctx: ReadContext) -> None:
        self.path, self.ctx = path, ctx
        self.tail: Tail | None = None
        self.state: dict[str, Any] = {}

    def poll(self) -> Rows:
        if self.tail is None:
            if not self.path.exists() or (self.path.is_file() and self.path.stat().st_size == 0):
                return []
            try:
                self.tail = _known(self.path, self.ctx)
            except UnknownFormatError:
                if self.path.is_file() and self.path.stat().st_size > SNIFF_BYTES:
                    raise  # a megabyte of text no reader recognises will not become one
                return []
            if self.state:
                self.tail.restore(self.state)
        return self.tail.poll()

    def to_state(self) -> dict[str, Any]:
        return self.tail.to_state() if self.tail is not None else dict(self.state)

    def restore(self, state: dict[str, Any]) -> None:
        self.state = dict(state)
        if self.tail is not None:
            self.tail.restore(state)
