"""Readers: one subpackage per format family, every reader behind one registry.

A reader satisfies :class:`~proxydiag.ingest.contract.Reader` (``NAME``, ``can_read(source)``,
``read(source, ctx)``). Register it in :data:`READERS` (order matters: the first reader that
says yes reads the source); ``docs/architecture.md`` shows how to add one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxydiag.errors import IngestError, UnknownFormatError
from proxydiag.ingest.contract import ReadContext, Reader
from proxydiag.metrics import AliasTable
from proxydiag.registry import Registry
from proxydiag.run import Run

__all__ = ["READERS", "ReadContext", "Reader", "detect", "discover", "read_run", "read_runs"]

#: reader name -> reader module, most specific first (imported on first use)
READERS: Registry[Reader] = Registry(
    "reader",
    {
        "mlflow_uri": "proxydiag.ingest.mlflow.uri",
        "mlflow_sql": "proxydiag.ingest.mlflow.sql",
        "mlflow_files": "proxydiag.ingest.mlflow.files",
        "tensorboard": "proxydiag.ingest.tensorboard",
        "wandb": "proxydiag.ingest.wandb.offline",
        "trainer_state": "proxydiag.ingest.tabular.trainer_state",
        "parquet": "proxydiag.ingest.tabular.parquet",
        "jsonl": "proxydiag.ingest.tabular.jsonl",
        "wandb_csv": "proxydiag.ingest.wandb.export_csv",
        "csv": "proxydiag.ingest.tabular.csv",
        "console": "proxydiag.ingest.console",
    },
)

#: files that are never runs when walking a directory
IGNORED_NAMES = frozenset({"proxydiag.json", "labels.json", "README.md", "NOTICE", ".DS_Store"})


def is_uri(source: str | Path) -> bool:
    """True for an MLflow run URI or a store URI (``runs:/...``, ``sqlite:///...``, ``http://``).

    >>> is_uri("runs:/abc"), is_uri("sqlite:///m.db"), is_uri("logs/run1")
    (True, True, False)
    """
    text = str(source)
    return "://" in text or text.startswith("runs:/")


def detect(source: str | Path) -> Reader | None:
    """The reader for ``source``, or None."""
    for reader in READERS:
        if reader.can_read(source):
            return reader
    return None


def read_runs(
    source: str | Path, *, aliases: AliasTable | str | Path | None = None, **options: Any
) -> list[Run]:
    """Read every run under ``source`` (a file, a directory tree, or an MLflow URI).

    ``aliases`` is an :class:`AliasTable` or the path of a user TOML file of aliases.
    """
    return _read(source, discover(source), aliases=aliases, options=options)


def read_run(
    source: str | Path, *, aliases: AliasTable | str | Path | None = None, **options: Any
) -> Run:
    """Read exactly one run; an error lists the runs when the source holds several.

    Several run files or folders under ``source`` fail before any is read (a folder of full
    runs can take long to read only to be refused).
    """
    found = discover(source)
    if len(found) > 1:
        raise _several(source, [_found_name(source, src) for _, src in found])
    runs = _read(source, found, aliases=aliases, options=options)
    if len(runs) > 1:
        raise _several(source, [r.name for r in runs])
    return runs[0]


def _read(
    source: str | Path,
    found: list[tuple[Reader, str | Path]],
    *,
    aliases: AliasTable | str | Path | None,
    options: dict[str, Any],
) -> list[Run]:
    if isinstance(aliases, str | Path):
        aliases = AliasTable.load(aliases)
    ctx = ReadContext(aliases or AliasTable.default(), dict(options))
    runs: list[Run] = []
    for reader, src in found:
        runs.extend(reader.read(src, ctx))
    if not runs:
        raise IngestError(f"{source}: no runs found")
    return runs


def _several(source: str | Path, names: list[str]) -> IngestError:
    shown = ", ".join(names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return IngestError(
        f"{source}: holds {len(names)} runs ({shown}{more}); name one of them "
        "(read_runs() reads them all)"
    )


def _found_name(source: str | Path, src: str | Path) -> str:
    """A discovered run's path relative to ``source`` (what to append to name it)."""
    try:
        return Path(src).relative_to(source).as_posix()
    except ValueError:
        return str(src)


def discover(source: str | Path) -> list[tuple[Reader, str | Path]]:
    """Pair each run-bearing file or directory under ``source`` with its reader."""
    if is_uri(source):
        reader = detect(source)
        if reader is None:
            raise UnknownFormatError(f"{source}: no reader for this URI")
        return [(reader, source)]
    path = Path(source)
    if not path.exists():
        raise IngestError(f"{path}: no such file or directory")
    reader = detect(path)
    if reader is not None:
        return [(reader, path)]
    if path.is_file():
        raise UnknownFormatError(
            f"{path}: unknown format (not TensorBoard, MLflow, W&B, CSV/TSV, Parquet, JSONL, "
            "trainer_state.json or a known console log)"
        )
    found: list[tuple[Reader, str | Path]] = []
    try:
        children = sorted(path.iterdir())
    except OSError as exc:
        raise IngestError(f"{path}: cannot list directory ({exc.strerror})") from exc
    for child in children:
        if child.name.startswith(".") or child.name in IGNORED_NAMES:
            continue
        if child.name.endswith(".proxydiag.json"):
            continue
        if child.is_symlink() and child.is_dir():
            continue  # a linked folder (W&B's latest-run) would be read twice, or loop
        if child.is_dir():
            found.extend(discover(child))
        else:
            reader = detect(child)
            if reader is not None:
                found.append((reader, child))
    return found
