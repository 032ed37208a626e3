"""The run store: a directory of Parquet files (one per run) plus a DuckDB catalog.

::

    <store>/runs/<run>.parquet   the canonical frame; metadata in the Parquet footer
    <store>/catalog.duckdb       tables runs, diagnoses, comparisons, pending (what each sink
                                 still has to send), meta(schema_version)
    <store>/.writer.lock         held by the one writing process (filelock)
    <store>/.journal.json        the run a writer is changing, until the catalog has it

Writers take the lock for one change (a run's ingest, a result); readers never do. A put writes
the Parquet file atomically, then updates the catalog in one transaction; the journal lets the
next writer finish a change that was killed between the two (the file is complete, so the
catalog is rolled forward from its footer). A reader therefore sees each run complete or not
at all, also while another process ingests.

>>> import tempfile, polars as pl
>>> from proxydiag.run.build import build_run
>>> store = RunStore(tempfile.mkdtemp())
>>> run = build_run(pl.DataFrame({"step": [1, 2], "key": ["loss"] * 2,
...                               "value": [0.5, float("nan")]}), name="r", source="s", fmt="csv")
>>> rid = store.put(run)
>>> store.runs()["n_points"].to_list(), store.get("r").frame["value"].to_list()
([2], [0.5, nan])
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from proxydiag.errors import StoreError
from proxydiag.frame import SCHEMA
from proxydiag.run import Run, slug
from proxydiag.store import _catalog as catalog
from proxydiag.store import _files as files
from proxydiag.store._lock import WriterLock
from proxydiag.store.outbox import Outbox

if TYPE_CHECKING:
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison

DEFAULT = Path(os.environ.get("PROXYDIAG_STORE", "proxydiag-store"))
JOURNAL = ".journal.json"
#: where workers write run files before the driver commits them (one directory per driver)
STAGING = ".staging"


@dataclass(frozen=True)
class Staged:
    """A run whose file a worker wrote to a staging directory of the store, and the catalog
    row the driver commits for it (:meth:`RunStore.commit`): no points cross to the driver.

    ``file`` is the staged file's path relative to the store; ``row`` the catalog row
    without ingest time and source (:func:`proxydiag.store._catalog.run_row`).
    """

    run: str
    name: str
    file: str
    digest: str
    row: dict[str, Any]

    @property
    def attrs(self) -> dict[str, Any]:
        attrs: dict[str, Any] = json.loads(self.row["attrs"])
        return attrs


def stage(store: str | Path, staging: str, run: Run) -> Staged:
    """Write ``run``'s file into the staging directory ``staging`` of ``store`` (atomically:
    temp file, ``fsync``, rename) and return what the driver needs to commit it. Runs in a
    worker; takes no lock and touches neither the catalog nor ``runs/``."""
    if run.frame.schema != pl.Schema(SCHEMA):
        raise StoreError(f"run {run.id}: frame does not follow the canonical schema")
    root = Path(store)
    digest = files.content_hash(run)
    name = f"{slug(run.id, max_len=200)}.{digest}.parquet"
    files.write(root / staging / name, run, digest=digest)
    target = f"{slug(run.id, max_len=200)}.parquet"
    return Staged(
        run.id,
        run.name,
        f"{staging}/{name}",
        digest,
        catalog.run_row(run, file=target, digest=digest),
    )


class RunStore:
    """A run store at ``path`` (created on the first write)."""

    def __init__(
        self,
        path: str | Path = DEFAULT,
        *,
        lock_timeout_s: float = 10.0,
        read_timeout_s: float = 10.0,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        self.read_timeout_s = read_timeout_s
        self._lock = WriterLock(self.path, timeout_s=lock_timeout_s)
        self._ready = False  # catalog created/checked by this instance
        #: results MLflow has not accepted yet (``outbox_for("mlflow")``)
        self.outbox = Outbox(self, catalog.MLFLOW)

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    def outbox_for(self, sink: str) -> Outbox:
        """The results the sink ``sink`` (one of :data:`~proxydiag.store.outbox.SINKS`) has not
        accepted yet (:class:`~proxydiag.store.outbox.Outbox`); StoreError for another name."""
        return self.outbox if sink == self.outbox.sink else Outbox(self, sink)

    @property
    def db(self) -> Path:
        return self.path / catalog.CATALOG_NAME

    # -- writing -------------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self) -> Iterator[RunStore]:
        """Hold the writer lock (re-entrant); raises StoreLockedError after lock_timeout_s."""
        self._check_dir()
        with self._lock:
            if self._lock.depth == 1:
                self._prepare()
            yield self

    def put(
        self,
        run: Run,
        *,
        source_key: str | None = None,
        source_hash: str | None = None,
    ) -> str:
        """Store ``run`` (replacing the run with the same id); returns the run id.

        ``source_key`` and ``source_hash`` name what the run was read from and the digest of
        that source and its reading configuration (a fleet ingest skips it while unchanged).
        """
        if run.frame.schema != pl.Schema(SCHEMA):
            raise StoreError(f"run {run.id}: frame does not follow the canonical schema")
        rid = run.id
        digest = files.content_hash(run)
        with self.writing():
            path = self._file(rid)
            if path.exists() and files.metadata(path).get("content_hash") == digest:
                if source_hash is not None:  # unchanged, now also known by its source
                    with self.session() as con:
                        con.execute(
                            "UPDATE runs SET source_key = ?, source_hash = ? WHERE run = ?",
                            [source_key, source_hash, rid],
                        )
                return rid  # unchanged: nothing else to do
            self._journal({"op": "put", "run": rid})
            files.write(path, run, digest=digest)
            with self.session() as con:
                catalog.upsert_run(
                    con,
                    run,
                    path=path,
                    digest=digest,
                    source_key=source_key,
                    source_hash=source_hash,
                )
            (self.path / JOURNAL).unlink()
        return rid

    def remove(self, ref: str) -> str:
        """Remove a run (by id or unique name) and its diagnosis; returns the run id."""
        with self.writing():
            rid = self.resolve(ref)
            self._journal({"op": "remove", "run": rid})
            with self.session() as con:
                con.execute("DELETE FROM runs WHERE run = ?", [rid])
                con.execute("DELETE FROM diagnoses WHERE run = ?", [rid])
                con.execute("DELETE FROM pending WHERE kind = 'diagnosis' AND key = ?", [rid])
            self._file(rid).unlink(missing_ok=True)
            self.outbox.forget("diagnosis", rid)
            (self.path / JOURNAL).unlink()
        return rid

    def put_diagnosis(self, diagnosis: Diagnosis, *, input_hash: str | None = None) -> None:
        """Keep a diagnosis (the latest per run); it is pending for each sink (MLflow) until
        that sink's outbox marks it synced.
        ``input_hash``: the digest of its inputs (a fleet diagnose reuses it while unchanged)."""
        self.put_diagnoses([(diagnosis, input_hash)])

    def put_comparison(self, comparison: Comparison, *, input_hash: str | None = None) -> str:
        """Keep a comparison (the latest per proxy and set of full runs); returns its key.
        ``input_hash``: the digest of its inputs (a fleet compare reuses it while unchanged)."""
        self.put_comparisons([(comparison, input_hash)])
        return comparison_key(comparison.proxy_run, comparison.full_runs)

    @contextlib.contextmanager
    def staging(self) -> Iterator[str]:
        """A staging directory of this driver (relative to the store), removed on exit.

        Entering finishes what a killed writer left (its journalled batch is rolled forward)
        and removes the staging directories of drivers on this host that are no longer
        running."""
        with self.writing():
            base = self.path / STAGING
            base.mkdir(exist_ok=True)
            _remove_dead_staging(base)
        name = f"{STAGING}/{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        (self.path / name).mkdir()
        try:
            yield name
        finally:
            shutil.rmtree(self.path / name, ignore_errors=True)

    def commit(self, batch: Sequence[tuple[Staged, str | None, str | None]]) -> list[str]:
        """Move staged runs into ``runs/`` and their catalog rows into the catalog in one
        transaction; ``batch``: ``(staged, source_key, source_hash)``. Returns the run ids.

        Journalled as one change: a writer killed half-way is rolled forward by the next
        one, and a catalog reader sees the whole batch or none of it. A staged run whose
        content the store already holds only gains its source (its file is not rewritten).
        """
        last = {staged.run: (staged, key, digest) for staged, key, digest in batch}
        entries = [[s.run, s.file, s.digest, key, digest] for s, key, digest in last.values()]
        if not entries:
            return []
        with self.writing():
            self._journal({"op": "batch", "runs": entries})
            rows, known = self._move_staged(entries)
            with self.session() as con:
                catalog.upsert_rows(
                    con,
                    [
                        dict(last[rid][0].row, source_key=key, source_hash=digest)
                        for rid, key, digest in rows
                    ],
                )
                for rid, key, digest in known:
                    con.execute(
                        "UPDATE runs SET source_key = ?, source_hash = ? WHERE run = ?",
                        [key, digest, rid],
                    )
            (self.path / JOURNAL).unlink()
        return [staged.run for staged, _, _ in batch]

    def _move_staged(
        self, entries: list[list[str | None]]
    ) -> tuple[list[tuple[str, str | None, str | None]], list[tuple[str, str | None, str | None]]]:
        """Rename each staged file over its run's file (under the lock); returns the runs
        whose file changed and those whose content the store already had."""
        moved, known = [], []
        for rid, staged, digest, key, source_hash in entries:
            assert rid is not None and staged is not None
            path = self._file(rid)
            item = (rid, key, source_hash)
            if path.exists() and _content_hash(path) == digest:
                (self.path / staged).unlink(missing_ok=True)
                known.append(item)
                continue
            try:
                os.replace(self.path / staged, path)
            except FileNotFoundError:
                raise StoreError(
                    f"{self.path / staged}: a staged run file is missing; is the store on "
                    "storage every worker shares?"
                ) from None
            moved.append(item)
        files.fsync_dir(self.path / "runs")
        return moved, known

    def put_diagnoses(self, batch: Sequence[tuple[Diagnosis, str | None]]) -> None:
        """Keep many diagnoses (``(diagnosis, input_hash)``) in one transaction."""
        batch = list({d.run: (d, digest) for d, digest in batch}.values())  # the last per run
        if not batch:
            return
        at = catalog.now()
        self._put_results(
            "diagnosis",
            "INSERT OR REPLACE INTO diagnoses (run, label, onset_step, confidence, json, "
            "created_at, input_hash)",
            {
                d.run: [
                    d.run,
                    d.label,
                    d.onset_step,
                    d.confidence,
                    json.dumps(d.to_dict(), default=str),
                    at,
                    digest,
                ]
                for d, digest in batch
            },
        )

    def put_comparisons(self, batch: Sequence[tuple[Comparison, str | None]]) -> None:
        """Keep many comparisons (``(comparison, input_hash)``) in one transaction."""
        batch = list({comparison_key(c.proxy_run, c.full_runs): (c, h) for c, h in batch}.values())
        if not batch:
            return
        at = catalog.now()
        self._put_results(
            "comparison",
            "INSERT OR REPLACE INTO comparisons (key, proxy_run, full_runs, fidelity, "
            "verdict, json, created_at, input_hash)",
            {
                key: [
                    key,
                    c.proxy_run,
                    list(c.full_runs),
                    c.fidelity,
                    c.verdict,
                    json.dumps(c.to_dict(), default=str),
                    at,
                    digest,
                ]
                for c, digest in batch
                if (key := comparison_key(c.proxy_run, c.full_runs))
            },
        )

    def _put_results(self, kind: str, insert: str, rows: dict[str, list[Any]]) -> None:
        """Keep result rows (key -> row) of ``kind`` in one transaction, queued for every sink;
        a report kept for an earlier result of the same key is stale."""
        with self.writing(), self.session() as con:
            catalog.insert_many(con, insert, list(rows.values()))
            catalog.enqueue(con, kind, list(rows))
            for key in rows:
                self.outbox.forget(kind, key)

    # -- reading -------------------------------------------------------------------------
    def runs(self) -> pl.DataFrame:
        """One row per run: id, name, role, group, seed, experts kept, cost, sizes, steps."""
        cols = ", ".join(f'"{c}"' for c in catalog.RUN_COLUMNS)
        try:
            return self.query(
                f"SELECT {cols} FROM runs ORDER BY ingested_at, run", catalog.RUNS_SCHEMA
            )
        except duckdb.BinderException:  # a catalog no writer has opened since experts_total
            cols = cols.replace('"experts_total"', 'NULL AS "experts_total"')
            return self.query(
                f"SELECT {cols} FROM runs ORDER BY ingested_at, run", catalog.RUNS_SCHEMA
            )

    def get(self, ref: str) -> Run:
        """The run with id ``ref`` (or the one run named ``ref``)."""
        direct = self._file(ref)
        if direct.name == f"{ref}.parquet" and direct.exists():
            try:
                return files.read(direct)  # a run id: the file alone is the whole run
            except FileNotFoundError:
                pass  # removed meanwhile: let the catalog say so
        return files.read(self._file(self.resolve(ref)))

    def resolve(self, ref: str) -> str:
        """The run id for an id or a unique name; StoreError if none or several."""
        found = self.query(
            "SELECT run, name FROM runs WHERE run = ? OR name = ? ORDER BY run = ? DESC, run",
            {"run": pl.Utf8(), "name": pl.Utf8()},
            [ref, ref, ref],
        )
        if found.height == 0:
            raise StoreError(f"{ref}: no such run in store {self.path}; see `proxydiag runs`")
        if found.height > 1 and found["run"][0] != ref:
            ids = ", ".join(found["run"].to_list()[:10])
            raise StoreError(f"{ref}: {found.height} runs have this name ({ids}); use a run id")
        return str(found["run"][0])

    def diagnoses(self) -> pl.DataFrame:
        """One row per run diagnosed: run, label, onset step, confidence, the whole result as
        JSON, and per sink ``<sink>_synced`` (``mlflow_synced``: MLflow has accepted it)."""
        return self._results("diagnosis")

    def comparisons(self) -> pl.DataFrame:
        """One row per comparison: proxy run, full runs, fidelity, verdict, the whole result as
        JSON, and per sink ``<sink>_synced``."""
        return self._results("comparison")

    def _results(self, kind: str) -> pl.DataFrame:
        """The rows of a result table, with a flag per sink: not pending in its queue."""
        table, key = catalog.RESULT_TABLES[kind]
        schema = catalog.result_schema(kind)
        columns = ", ".join(catalog.RESULT_COLUMNS[kind])
        flags = ", ".join(
            "NOT EXISTS (SELECT 1 FROM pending p WHERE p.sink = ? AND p.kind = ? "
            f'AND p.key = t.{key}) AS "{sink}_synced"'
            for sink in catalog.SINKS
        )
        params = [value for sink in catalog.SINKS for value in (sink, kind)]
        try:
            return self.query(
                f"SELECT {columns}, {flags} FROM {table} t ORDER BY {key}", schema, params
            )
        except duckdb.CatalogException:  # a catalog of schema <= 2 no writer has opened since
            flags = ", ".join(  # MLflow's flag was a column; no other sink existed
                "mlflow_synced" if sink == catalog.MLFLOW else f'true AS "{sink}_synced"'
                for sink in catalog.SINKS
            )
            return self.query(f"SELECT {columns}, {flags} FROM {table} ORDER BY {key}", schema)

    def query(
        self,
        sql: str,
        schema: dict[str, pl.DataType],
        params: list[Any] | None = None,
    ) -> pl.DataFrame:
        """The rows of a read-only SQL query on the catalog, typed by ``schema`` (no rows
        where there is no catalog yet)."""
        self._check_dir()
        if not self.db.exists():
            return pl.DataFrame(schema=schema)
        with catalog.session(self.db, read_only=True, timeout_s=self.read_timeout_s) as con:
            rel = con.execute(sql, params or [])
            names = [d[0] for d in rel.description or []]
            rows = rel.fetchall()
        return pl.DataFrame(
            rows, schema=list(zip(names, schema.values(), strict=True)), orient="row"
        )

    def scan(self) -> pl.LazyFrame:
        """A LazyFrame over every stored run's Parquet (only runs the catalog lists)."""
        ids = self.runs()["run"].to_list()
        if not ids:
            return pl.LazyFrame(schema=SCHEMA)
        return pl.scan_parquet([self._file(rid) for rid in ids], glob=False)

    def size_bytes(self) -> int:
        """Bytes on disk of the whole store directory."""
        if not self.path.exists():
            return 0
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())

    # -- internals -----------------------------------------------------------------------
    def _file(self, rid: str) -> Path:
        return self.path / "runs" / f"{slug(rid, max_len=200)}.parquet"

    def check_writable_place(self) -> None:
        """StoreError when ``path`` is a file (before any work is done for this store)."""
        self._check_dir()

    def _check_dir(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path}: is a file, not a store directory; use another --store")

    def session(self) -> contextlib.AbstractContextManager[Any]:
        """A read-write catalog connection (take :meth:`writing` first to change it)."""
        return catalog.session(self.db, read_only=False, timeout_s=self.lock_timeout_s)

    def _journal(self, entry: dict[str, Any]) -> None:
        path = self.path / JOURNAL
        with path.open("w", encoding="utf-8") as fh:
            json.dump(entry, fh)
            fh.flush()
            os.fsync(fh.fileno())

    def _prepare(self) -> None:
        """Under the lock: create the layout and finish a change a killed writer left."""
        if not self._ready or not self.db.exists():
            (self.path / "runs").mkdir(parents=True, exist_ok=True)
            with self.session() as con:
                catalog.create(con, self.db)
            self._ready = True
        for tmp in (self.path / "runs").glob(".*.tmp"):  # a killed writer's
            tmp.unlink(missing_ok=True)
        self.outbox.clean_temporaries()
        journal = self.path / JOURNAL
        if not journal.exists():
            return
        try:
            entry = json.loads(journal.read_text(encoding="utf-8"))
        except ValueError:
            entry = {}
        rid = entry.get("run")
        if rid:
            self._recover(str(rid), str(entry.get("op")))
        elif entry.get("op") == "batch":
            self._recover_batch(entry.get("runs", []))
        journal.unlink()

    def _recover_batch(self, entries: list[list[str | None]]) -> None:
        """Roll a killed batch forward: move what is still staged, then write the catalog
        rows of every run of the batch from its file's footer (idempotent)."""
        rows = []
        for rid, staged, digest, key, source_hash in entries:
            assert rid is not None
            path = self._file(rid)
            source = self.path / str(staged)
            if source.exists() and _content_hash(path) != digest:
                os.replace(source, path)
            source.unlink(missing_ok=True)
            if path.exists() and _content_hash(path) == digest:
                run = files.read(path)
                row = catalog.run_row(run, file=path.name, digest=str(digest))
                rows.append(dict(row, source_key=key, source_hash=source_hash))
        files.fsync_dir(self.path / "runs")
        with self.session() as con:
            catalog.upsert_rows(con, rows)

    def _recover(self, rid: str, op: str) -> None:
        path = self._file(rid)
        with self.session() as con:
            if op == "put" and path.exists():
                run = files.read(path)
                catalog.upsert_run(
                    con, run, path=path, digest=files.metadata(path).get("content_hash", "")
                )
            else:
                con.execute("DELETE FROM runs WHERE run = ?", [rid])
                path.unlink(missing_ok=True)


def _content_hash(path: Path) -> str | None:
    """The content digest a run file carries (None when it is unreadable)."""
    try:
        return str(files.metadata(path).get("content_hash"))
    except (OSError, StoreError):
        return None


def _remove_dead_staging(base: Path) -> None:
    """Remove the staging directories (``HOST-PID-TOKEN``) of this host's dead processes."""
    host = socket.gethostname()
    for folder in base.iterdir():
        owner, _, rest = folder.name.rpartition("-")[0].rpartition("-")
        if owner != host or not rest.isdigit():
            continue
        try:
            os.kill(int(rest), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


#: what only a store holds: its catalog, its run files, the live guard's state (``watch`` keeps
#: it in STORE/watch, so a store used by ``watch`` before any ingest holds only that)
OWN_ENTRIES = (catalog.CATALOG_NAME, "runs", "watch")


def has_catalog(path: Path) -> bool:
    """Whether ``path`` is a store runs were ingested into (its catalog exists); no import of
    DuckDB, no store created."""
    return (Path(path) / catalog.CATALOG_NAME).exists()


def holds_store(path: Path) -> bool:
    """Whether ``path`` holds anything only a store holds (:data:`OWN_ENTRIES`): a folder a
    command may replace as a store, where any other folder is kept."""
    return any((Path(path) / entry).exists() for entry in OWN_ENTRIES)


def comparison_key(proxy_run: str, full_runs: Any) -> str:
    """``proxy<-full1,full2`` (full runs sorted)."""
    return f"{proxy_run}<-{','.join(sorted(full_runs))}"
