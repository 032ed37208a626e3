"""From a reader's raw frame to a :class:`~proxydiag.run.Run`: restarts, aliases, counters,
metadata."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from proxydiag.events import Event
from proxydiag.frame import coerce_raw
from proxydiag.metrics import AliasTable
from proxydiag.run import Run, _summary, keys, run_id
from proxydiag.run import _segments as segments
from proxydiag.run._grouped import group_by_metric
from proxydiag.run.params import experts_from_params
from proxydiag.run.sidecar import read_sidecar


def build_run(
    raw: pl.DataFrame,
    *,
    name: str,
    source: str | Path,
    fmt: str,
    aliases: AliasTable | None = None,
    attrs: Mapping[str, Any] | None = None,
    events: list[Event] | None = None,
    sidecar: Path | None = None,
    monotonic: bool = False,
    rollbacks: bool = True,
) -> Run:
    """Turn a raw frame (``step, key, value, wall_time`` in file order) into a canonical Run.

    Keys become integer codes (:mod:`~proxydiag.run.keys`), aliases are resolved once per
    distinct key, and the rows are grouped by metric name with the steps of each ascending.
    When some key's steps drop or repeat along the file (a restart, interleaved ranks), the
    rules of :mod:`~proxydiag.run._segments` resolve them first. ``monotonic=True`` is the
    reader's promise that every key's steps strictly increase in file order (a wide table
    whose step column increases): the check is skipped.

    ``sidecar`` is the path of a ``proxydiag.json`` to merge into attrs (if it exists);
    its fields override what the reader found (a user's statement beats inference).

    With ``rollbacks``, each timeline a restart superseded becomes a Run of its own in
    ``Run.superseded`` (the rows before the restart step plus the superseded ones): the run
    as it stood before it was rolled back, for the diagnosis.
    """
    table = aliases or AliasTable.default()
    frame = coerce_raw(raw)
    del raw  # with the caller's only reference, ``del frame`` below frees the key column
    coded = keys.of(frame["key"])
    summary_keys = _summary.candidates(coded.names)
    if summary_keys:  # the HF run-end summary: attrs, not curve points
        frame, summary = _summary.split(frame, summary_keys)
        if summary:
            attrs = {**(attrs or {}), "run_summary": summary}
            coded = keys.of(frame["key"])
    # aliases compete among the keys that have rows: an Enum may name keys without any (an
    # empty column of a wide table), and those must not win a canonical name
    resolved = table.resolve(
        [k for k, has in zip(coded.names, coded.present(), strict=True) if has]
    )
    grouped = group_by_metric(frame, coded, [resolved.get(k, k) for k in coded.names])
    if not monotonic and grouped.steps_not_increasing():
        frame, seg_events, dropped = segments.resolve_all(frame)
        run = build_run(
            frame,
            name=name,
            source=source,
            fmt=fmt,
            aliases=table,
            attrs=attrs,
            events=[*(events or []), *seg_events],
            sidecar=sidecar,
            monotonic=True,
        )
        if rollbacks:
            run.superseded = _superseded(frame, dropped, run, source=source, fmt=fmt, aliases=table)
        return run
    del frame  # ``grouped`` holds what is left of it
    name, all_attrs = run_attrs(name, source, fmt, attrs, sidecar)
    out = grouped.frame(all_attrs["run_id"], cumulative_metrics(table, grouped.metrics))
    return make_run(out, name, all_attrs, table, resolved, events)


#: at most this many rollbacks of one run are kept as superseded timelines (the earliest)
MAX_ROLLBACKS = 10


def _superseded(kept: pl.DataFrame, dropped: pl.DataFrame, run: Run, **build: Any) -> list[Run]:
    """The timelines the restarts superseded, each as the run stood before its rollback."""
    if dropped.is_empty():
        return []
    out = []
    # in the order the rollbacks happened (the superseded rows come in file order)
    backs = dropped[segments.ROLLED_BACK_TO].drop_nulls().unique(maintain_order=True).to_list()
    for back in backs[:MAX_ROLLBACKS]:
        rows = dropped.filter(pl.col(segments.ROLLED_BACK_TO) == back).drop(segments.ROLLED_BACK_TO)
        before = kept.filter(pl.col("step") < back).select(rows.columns)
        attrs = {
            **run.attrs,
            "rolled_back_to": int(back),
            "superseded_until": int(rows["step"].max() or back),  # type: ignore[arg-type]
            "run_id": f"{run.id}@{back}",
        }
        out.append(
            build_run(
                pl.concat([before, rows.cast(before.schema)]),
                name=f"{run.name} (before the rollback to {back})",
                attrs=attrs,
                rollbacks=False,
                **build,
            )
        )
    return out


def run_attrs(
    name: str,
    source: str | Path,
    fmt: str,
    attrs: Mapping[str, Any] | None,
    sidecar: Path | None,
) -> tuple[str, dict[str, Any]]:
    """The run's name and attrs: the reader's, then the sidecar's (a user's statement beats
    inference), with the run id."""
    all_attrs: dict[str, Any] = {"format": fmt, "source": str(source)}
    all_attrs.update(attrs or {})
    if sidecar is not None:
        all_attrs.update(read_sidecar(sidecar))
    if all_attrs.get("experts_kept") is None and isinstance(all_attrs.get("params"), Mapping):
        experts = experts_from_params(all_attrs["params"])
        if experts is not None:
            all_attrs["experts_kept"] = experts
            all_attrs["experts_kept_from"] = "the model config in the run's params"
    name = str(all_attrs.pop("name", None) or name)
    all_attrs["run_id"] = str(all_attrs.get("run_id") or run_id(name, str(source)))
    return name, all_attrs


def cumulative_metrics(table: AliasTable, metrics: list[str]) -> set[str]:
    """Which of ``metrics`` are cumulative counters (made per-step counts)."""
    return {m for m in metrics if m in table.specs and table.specs[m].counter == "cumulative"}


def make_run(
    frame: pl.DataFrame,
    name: str,
    attrs: dict[str, Any],
    aliases: AliasTable,
    resolved: Mapping[str, str],
    events: list[Event] | None,
) -> Run:
    """The Run, mapping each canonical metric to the key it was read from."""
    mapping = {m: k for k, m in resolved.items() if m in aliases.specs}
    return Run(frame, name, attrs, mapping, list(events or []))
