"""From a reader's raw frame to a :class:`~proxydiag.run.Run`: restarts, aliases, counters, metadata."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from proxydiag.events import Event
from proxydiag.frame import coerce_raw
from proxydiag.metrics import AliasTable
from proxydiag.run import Run, keys, run_id
from proxydiag.run import _segments as segments
from proxydiag.run._grouped import group_by_metric
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
    """
    table = aliases or AliasTable.default()
    frame = coerce_raw(raw)
    del raw  # with the caller's only reference, ``del frame`` below frees the key column
    coded = keys.of(frame["key"])
    # aliases compete among the keys that have rows: an Enum may name keys without any (an
    # empty column of a wide table), and those must not win a canonical name
    resolved = table.resolve([k for k, has in zip(coded.names, coded.present(), strict=True)
                              if has])
    grouped = group_by_metric(frame, coded, [resolved.get(k, k) for k in coded.names])
    if not monotonic and grouped.steps_not_increasing():
        frame, seg_events = segments.resolve(frame)
        return build_run(
            frame, name=name, source=source, fmt=fmt, aliases=table, attrs=attrs,
            events=[*(events or []), *seg_events], sidecar=sidecar, monotonic=True,
        )
    del frame  # ``grouped`` holds what is left of it
    name, all_attrs = run_attrs(name, source, fmt, attrs, sidecar)
    out = grouped.frame(all_attrs["run_id"], cumulative_metrics(table, grouped.metrics))
    return make_run(out, name, all_attrs, table, resolved, events)


def run_attrs(
    name: str, source: str | Path, fmt: str, attrs: Mapping[str, Any] | None,
    sidecar: Path | None,
) -> tuple[str, dict[str, Any]]:
    """The run's name and attrs: the reader's, then the sidecar's (a user's statement beats
    inference), with the run id."""
    all_attrs: dict[str, Any] = {"format": fmt, "source": str(source)}
    all_attrs.update(attrs or {})
    if sidecar is not None:
        all_attrs.update(read_sidecar(sidecar))
    name = str(all_attrs.pop("name", None) or name)
    all_attrs["run_id"] = str(all_attrs.get("run_id") or run_id(name, str(source)))
    return name, all_attrs


def cumulative_metrics(table: AliasTable, metrics: list[str]) -> set[str]:
    """Which of ``metrics`` are cumulative counters (made per-step counts)."""
    return {m for m in metrics if m in table.specs and table.specs[m].counter == "cumulative"}


def make_run(
    frame: pl.DataFrame, name: str, attrs: dict[str, Any], aliases: AliasTable,
    resolved: Mapping[str, str], events: list[Event] | None,
) -> Run:
    """The Run, mapping each canonical metric to the key it was read from."""
    mapping = {m: k for k, m in resolved.items() if m in aliases.specs}
    return Run(frame, name, attrs, mapping, list(events or []))


