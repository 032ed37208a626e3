"""Parse the metric files of an MLflow file-store run (``metrics/<key...>``) into a raw frame.

Each line is ``"<timestamp ms> <value> [<step>]"``, appended by
``FileStore._log_run_metric`` as ``f"{timestamp} {value} {step}\\n"`` (Python's ``str(float)``,
so ``nan``, ``inf`` and ``-inf`` are data); MLflow's own reader (``_get_metric_from_line``)
accepts two fields with step 0.

Each file is parsed by one polars call (the fast path, millions of points per second).
A file polars does not parse cleanly is re-read line by line with MLflow's own rules (the slow
path), which names the first bad line as ``file:line``.

Damage policy: a last line without its newline is an append in progress or a cut file; it is
dropped with an :class:`~proxydiag.errors.IngestWarning` naming ``file@offset`` (a cut line can
look valid, e.g. ``0.123`` cut to ``0.12``, so it is never read). A malformed line elsewhere
is an :class:`~proxydiag.errors.IngestError` naming ``file:line``: a metric file is machine
written, so a bad line in the middle means the file was edited or corrupted, and guessing
would risk silently wrong numbers.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import polars as pl

from proxydiag.errors import IngestError, IngestWarning, where
from proxydiag.frame import empty_raw

_CSV_SCHEMA = {"timestamp": pl.Int64(), "value": pl.Float64(), "step": pl.Int64()}


def metric_files(metrics_dir: Path) -> list[tuple[str, Path]]:
    """``(key, path)`` of every metric file under ``metrics_dir``; ``/`` in a key is a folder.

    >>> metric_files(Path("/no/such/dir"))
    []
    """
    found: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(metrics_dir):
        dirs.sort()
        rel = os.path.relpath(folder, metrics_dir)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        found.extend((prefix + name, Path(folder, name)) for name in sorted(files))
    return found


def read_metrics(files: list[tuple[str, Path]]) -> pl.DataFrame:
    """The raw frame (``step, key, value, wall_time``) of a run's metric files, in file order."""
    parts = []
    for key, path in files:
        data = _complete_lines(path)
        if not data:
            continue
        parsed = _parse_fast(data, data.count(b"\n"))
        if parsed is None:
            parsed = _parse_slow(path, data)
        parts.append(
            parsed.select(
                "step",
                pl.lit(key, dtype=pl.Utf8).alias("key"),
                "value",
                (pl.col("timestamp").cast(pl.Float64) / 1000.0).alias("wall_time"),
            )
        )
    return pl.concat(parts) if parts else empty_raw()


def _complete_lines(path: Path) -> bytes:
    """The file's bytes up to its last newline; a cut last line is dropped with a warning."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"{path}: cannot read metric file ({exc.strerror})") from exc
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        warnings.warn(
            IngestWarning(
                f"{where(path, offset=cut)}: last line has no newline (a write in progress or a "
                f"cut file); its {len(data) - cut} bytes were not read"
            ),
            stacklevel=4,
        )
        data = data[:cut]
    return data


def _parse_fast(blob: bytes, n_lines: int) -> pl.DataFrame | None:
    """One polars parse of all lines, or None when anything looks off (then the slow path)."""
    try:
        frame = pl.read_csv(
            blob,
            has_header=False,
            separator=" ",
            schema=_CSV_SCHEMA,
            quote_char=None,
            raise_if_empty=False,
        )
    except (pl.exceptions.PolarsError, ValueError):
        return None
    if frame.height != n_lines:
        return None
    if frame.select(pl.col("timestamp").is_null().any() | pl.col("value").is_null().any()).item():
        return None
    return frame.with_columns(pl.col("step").fill_null(0))


def _parse_slow(path: Path, data: bytes) -> pl.DataFrame:
    """MLflow's own line rules, one line at a time; the first bad line raises ``file:line``."""
    stamps: list[int] = []
    values: list[float] = []
    steps: list[int] = []
    for lineno, raw_line in enumerate(data.split(b"\n")[:-1], start=1):
        parts = raw_line.decode("utf-8", errors="replace").strip().split(" ")
        try:
            if len(parts) not in (2, 3):
                raise ValueError(f"{len(parts)} fields")
            stamp, value = int(parts[0]), float(parts[1])
            step = int(parts[2]) if len(parts) == 3 else 0
        except ValueError:
            shown = raw_line[:60].decode("utf-8", errors="replace")
            raise IngestError(
                f"{where(path, lineno)}: {shown!r} is not an MLflow metric line "
                "'<timestamp ms> <value> <step>'; fix or delete that line"
            ) from None
        stamps.append(stamp)
        values.append(value)
        steps.append(step)
    return pl.DataFrame({"timestamp": stamps, "value": values, "step": steps}, schema=_CSV_SCHEMA)
