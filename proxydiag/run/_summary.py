"""A run-end summary is not a curve: the values the HF Trainer logs once when training ends.

``Trainer.train()`` ends with one log of ``train_runtime``, ``train_samples_per_second``,
``train_steps_per_second``, ``total_flos`` and ``train_loss`` (the mean loss over the run),
which every logger writes like a curve point: a last ``log_history`` entry, TensorBoard tags
``train/train_runtime``..., MLflow metrics ``train_runtime``... Read as curves they are
one-point metrics, and ``train_loss`` (an alias of ``loss``) would become a point of the
loss curve. Where ``train_runtime`` has a single point, every summary key with a single
point leaves the frame and its value goes into ``attrs["run_summary"]``; a framework that
logs such a key at every step keeps its curve.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

#: what ``Trainer.train()`` logs once at the end (``transformers/trainer.py``, ``speed_metrics``)
SUMMARY_NAMES = frozenset(
    {
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "total_flos",
        "train_loss",
    }
)
#: prefixes loggers put before them (TensorBoardCallback's ``train/``)
_PREFIXES = ("train/",)


def summary_name(key: str) -> str | None:
    """The summary name a key stands for, or None.

    >>> summary_name("train/train_runtime"), summary_name("train_loss"), summary_name("loss")
    ('train_runtime', 'train_loss', None)
    """
    for prefix in ("", *_PREFIXES):
        if key.startswith(prefix) and key[len(prefix) :] in SUMMARY_NAMES:
            return key[len(prefix) :]
    return None


def candidates(names: Sequence[str]) -> list[str]:
    """The keys among ``names`` that may be summary values (cheap: names only)."""
    found = [k for k in names if summary_name(k) is not None]
    return found if any(summary_name(k) == "train_runtime" for k in found) else []


def split(frame: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, dict[str, float]]:
    """Take the single-point summary ``keys`` out of a raw frame (``step, key, value, ...``).

    >>> f = pl.DataFrame({"step": [1, 2, 2, 2], "key": ["loss", "loss", "train_runtime",
    ...                   "train_loss"], "value": [3.0, 2.0, 9.5, 2.5]})
    >>> out, summary = split(f, candidates(f["key"].unique().to_list()))
    >>> out["key"].to_list(), summary
    (['loss', 'loss'], {'train_runtime': 9.5, 'train_loss': 2.5})
    """
    if not keys:
        return frame, {}
    text = pl.col("key").cast(pl.Utf8)
    rows = frame.filter(text.is_in(keys))
    counts = dict(rows.group_by(text.alias("k")).len().iter_rows())
    if counts.get(next(k for k in keys if summary_name(k) == "train_runtime"), 0) != 1:
        return frame, {}
    single = [k for k in keys if counts.get(k, 0) == 1]
    summary = {
        str(summary_name(k)): float(v)
        for k, v in rows.filter(text.is_in(single)).select(text, "value").iter_rows()
    }
    return frame.filter(~text.is_in(single)), summary
