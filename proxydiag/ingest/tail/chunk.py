"""Decode the bytes a tail just read with the format's own offline reader.

A tail never parses a format itself: the complete lines (or records) appended since the last
tick are written to a scratch file of the same kind and read by the registered reader
(:mod:`proxydiag.ingest.tabular.jsonl`, :mod:`~proxydiag.ingest.tabular.csv`,
:mod:`~proxydiag.ingest.console`,
:mod:`~proxydiag.ingest.tensorboard`), so every spelling, dialect, CRC check and NaN rule is
the offline one. The work is proportional to the bytes appended.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

from proxydiag.errors import IngestError, IngestWarning, NoPointsError
from proxydiag.ingest import ReadContext
from proxydiag.ingest.contract import Reader
from proxydiag.run.rows import steps_of

Rows = list[tuple[int, dict[str, float]]]


def decode(data: bytes, *, reader: Reader, source: Path, ctx: ReadContext) -> Rows:
    """The ``(step, {key: value})`` rows of ``data``, appended to ``source``, read as a file
    of its name; a chunk with no metric points (a console's start-up text) is no rows, and an
    error names ``source``, not the scratch file."""
    if not data:
        return []
    with tempfile.TemporaryDirectory(prefix="proxydiag-tail-") as tmp:
        path = Path(tmp) / source.name
        path.write_bytes(data)
        with warnings.catch_warnings():
            # a chunk without its file's first lines warns about what it lacks (no header
            # metadata, a step-less line): the whole source is read offline at the end
            warnings.simplefilter("ignore", IngestWarning)
            try:
                runs = reader.read(path, ctx)
            except NoPointsError:
                return []
            except IngestError as exc:
                raise type(exc)(str(exc).replace(str(path), str(source))) from None
    rows: Rows = []
    for run in runs:
        rows.extend(steps_of(run))
    rows.sort(key=lambda r: r[0])
    return rows


def vanished(path: Path, missing: bool) -> bool:
    """A tailed ``path`` is gone: warn the first time (``missing`` false), then stay quiet until
    it returns. Returns the new ``missing`` flag (always true); the warning points at the
    caller of the tail method that noticed (``stacklevel`` counts this helper)."""
    if not missing:
        warnings.warn(IngestWarning(f"{path}: vanished; waiting for it to return"), stacklevel=3)
    return True
