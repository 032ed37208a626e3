"""One run's Parquet file in the store: written atomically, self-describing.

The frame goes to a temporary name beside the target, is flushed and ``fsync``-ed, then renamed
over ``runs/<run>.parquet`` (``os.replace`` is atomic), and the directory is ``fsync``-ed: a
reader sees the old file or the new one, never half a file. The run's name, attrs, mapping and
events travel in the file's key-value metadata (key ``proxydiag``), so a file alone is a whole
:class:`~proxydiag.run.Run` — the catalog indexes it and can be rebuilt from it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import polars as pl

from proxydiag.errors import StoreError
from proxydiag.events import Event
from proxydiag.frame import SCHEMA
from proxydiag.run import Run

META_KEY = "proxydiag"


def content_hash(run: Run) -> str:
    """A digest of the frame and metadata (equal runs, equal hash within one polars version)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(run.frame.hash_rows(seed=7).to_numpy().tobytes())
    digest.update(json.dumps(describe(run), sort_keys=True, default=str).encode())
    return digest.hexdigest()


def describe(run: Run) -> dict[str, Any]:
    """The run's metadata as JSON-able data (what the Parquet footer carries)."""
    return {
        "name": run.name,
        "attrs": run.attrs,
        "mapping": run.mapping,
        "events": [e.to_dict() for e in run.events],
    }


def write(path: Path, run: Run, *, digest: str) -> None:
    """Write ``run`` to ``path`` atomically (temp file, fsync, rename, fsync directory)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    meta = dict(describe(run), content_hash=digest)
    try:
        with tmp.open("wb") as fh:
            run.frame.write_parquet(
                fh,
                compression="zstd",
                metadata={META_KEY: json.dumps(meta, default=str)},
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def metadata(path: Path) -> dict[str, Any]:
    """The ``proxydiag`` metadata of a run file."""
    try:
        raw = pl.read_parquet_metadata(path).get(META_KEY)
    except FileNotFoundError:
        raise
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise StoreError(
            f"{path}: unreadable run file ({exc}); remove the run and re-ingest"
        ) from exc
    if raw is None:
        raise StoreError(f"{path}: not a proxydiag run file (no metadata)")
    data: dict[str, Any] = json.loads(raw)
    return data


def read(path: Path) -> Run:
    """Read a run file back into a :class:`Run`."""
    meta = metadata(path)
    try:
        frame = pl.read_parquet(path, glob=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise StoreError(
            f"{path}: unreadable run file ({exc}); remove the run and re-ingest"
        ) from exc
    frame = frame.select([pl.col(c).cast(t) for c, t in SCHEMA.items()])
    events = [Event(**e) for e in meta.get("events", [])]
    return Run(frame, meta["name"], meta.get("attrs", {}), meta.get("mapping", {}), events)
