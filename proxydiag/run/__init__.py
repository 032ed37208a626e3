"""`Run`: one training run in the canonical frame, with its metadata."""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from proxydiag.events import Event
from proxydiag.frame import validate

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    import pandas as pd

    from proxydiag.metrics import AliasTable

#: what a run is in an experiment (a sidecar's fields, MLflow params)
PLAN_ATTRS = (
    "role",
    "group",
    "seed",
    "experts_kept",
    "experts_total",
    "cost_per_step",
    "precision",
)
#: attrs every run has (None when unknown)
STANDARD_ATTRS = (
    *PLAN_ATTRS,
    "step_kind",
    "format",
    "source",
    "log_interval",
    "notes",
)


@dataclass
class Run:
    """One run: the canonical frame plus metadata.

    Attributes
    ----------
    frame
        Canonical long polars frame (see :mod:`proxydiag.frame`).
    name
        Human name (the logdir, file stem, or MLflow run name).
    attrs
        ``role`` (full/proxy), ``group``, ``seed``, ``experts_kept``, ``cost_per_step``,
        ``precision``, ``step_kind``, ``params``, ``tags``, ``notes``, ``source``, ``format`` ...
    mapping
        canonical metric -> the source key actually used.
    events
        Events found while reading (restarts, CRC errors, truncation).
    superseded
        The timelines a restart from an earlier step (a rollback) superseded: each is the run
        as it stood before that rollback (its ``attrs["rolled_back_to"]`` is the step the run
        went back to). Kept in memory for the diagnosis; not stored.
    """

    frame: pl.DataFrame
    name: str
    attrs: dict[str, Any] = field(default_factory=dict)
    mapping: dict[str, str] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    superseded: list[Run] = field(default_factory=list)

    @classmethod
    def from_raw(
        cls,
        raw: pl.DataFrame,
        *,
        name: str,
        source: str | Path,
        fmt: str,
        aliases: AliasTable | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> Run:
        """The run of a raw frame (``step, key, value[, wall_time]``, in the order logged).

        Restarts and interleaved records are resolved, keys mapped to canonical metric names
        (``aliases``, default the built-in table), counters normalised to per-step and
        ``attrs`` attached; NaN and ±inf values are kept. Readers call
        :func:`proxydiag.run.build.build_run`, which also takes the events found while reading
        and the sidecar to merge.

        >>> raw = pl.DataFrame({"step": [1, 2, 2], "key": ["train/loss", "train/loss", "lr"],
        ...                     "value": [2.0, float("nan"), 1e-5]})
        >>> run = Run.from_raw(raw, name="r", source="example", fmt="example")
        >>> run.mapping["loss"], run.frame.height
        ('train/loss', 3)
        """
        from proxydiag.run.build import build_run

        return build_run(raw, name=name, source=source, fmt=fmt, aliases=aliases, attrs=attrs)

    @property
    def id(self) -> str:
        """The stable run id (the frame's ``run`` column)."""
        rid = self.attrs.get("run_id")
        if rid:
            return str(rid)
        if self.frame.height:
            return str(self.frame["run"][0])
        return run_id(self.name, str(self.attrs.get("source", "")))

    @property
    def metrics(self) -> list[str]:
        """Metric names present, sorted."""
        return sorted(self.frame["metric"].unique().to_list())

    def has(self, metric: str) -> bool:
        return bool(self.frame.select((pl.col("metric") == metric).any()).item())

    def series(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one metric as numpy arrays, sorted by step (NaN/inf kept)."""
        sub = self.frame.filter(pl.col("metric") == metric).sort("step")
        return sub["step"].to_numpy(), sub["value"].to_numpy()

    def wide(self, metrics: list[str] | None = None) -> pl.DataFrame:
        """One row per step, one column per metric (absent values are null, NaN stays NaN)."""
        frame = (
            self.frame if metrics is None else self.frame.filter(pl.col("metric").is_in(metrics))
        )
        return frame.pivot(
            on="metric", index="step", values="value", aggregate_function="last"
        ).sort("step")

    @property
    def n_steps(self) -> int:
        return int(self.frame["step"].n_unique()) if self.frame.height else 0

    @property
    def last_step(self) -> int:
        return int(self.frame["step"].max()) if self.frame.height else 0  # type: ignore[arg-type]

    @property
    def first_step(self) -> int:
        return int(self.frame["step"].min()) if self.frame.height else 0  # type: ignore[arg-type]

    def to_pandas(self) -> pd.DataFrame:
        return self.frame.to_pandas()

    def validate(self) -> Run:
        validate(self.frame)
        return self

    def __repr__(self) -> str:
        return (
            f"Run({self.id!r}, name={self.name!r}, points={self.frame.height}, "
            f"metrics={len(self.metrics)}, role={self.attrs.get('role')!r})"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(m)}</td><td>{html.escape(self.mapping.get(m, m))}</td></tr>"
            for m in self.metrics[:60]
        )
        meta = ", ".join(
            f"{k}={html.escape(str(self.attrs[k]))}"
            for k in STANDARD_ATTRS
            if self.attrs.get(k) is not None and k != "source"
        )
        return (
            f"<div><b>Run</b> <code>{html.escape(self.id)}</code> "
            f"({self.frame.height:,} points, steps {self.first_step}–{self.last_step})"
            f"<br><small>{meta}</small>"
            f"<table><tr><th>metric</th><th>key</th></tr>{rows}</table></div>"
        )


_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str, *, max_len: int = 80) -> str:
    """A file-name-safe form of ``text`` (no separators, no leading dots).

    >>> slug("../../etc/passwd <x>")
    'etc_passwd_x'
    """
    out = _SLUG.sub("_", text).strip("._-")
    return out[:max_len] or "run"


def run_id(name: str, source: str) -> str:
    """Stable run id: a slug of the name plus a short hash of source and name.

    >>> run_id("exp1", "/data/exp1")
    'exp1-...'
    """
    digest = hashlib.sha1(f"{source}\0{name}".encode()).hexdigest()[:8]
    return f"{slug(name, max_len=60)}-{digest}"
