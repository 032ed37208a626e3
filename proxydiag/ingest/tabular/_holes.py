"""Empty cells where a value was expected: the warning that a writer may have lost NaN.

An empty cell is a value that was not logged, and reads as no row. But pandas' ``to_csv`` writes
NaN as an empty cell, and ``to_parquet`` as null: a bf16 run's NaN grad norms exported that way
look like gaps. Empty cells in a column that had a value on each of its first rows warn, naming
the column and the rows, unless the step was skipped by the loss scaler (a skipped step logs no
grad norm, by design: Megatron, DeepSpeed).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence

import numpy as np
import polars as pl

from proxydiag.errors import IngestWarning
from proxydiag.metrics import SKIP_COUNTERS, AliasTable
from proxydiag.run.wide import Wide


def holes(
    table: Wide,
    *,
    least: int = 10,
    skipped: np.ndarray | None = None,
) -> list[tuple[str, int, int]]:
    """Columns with a value on each of their first ``least`` rows or more that then have
    empty cells (up to the table's last row): ``(name, the step of the first empty cell,
    how many empty cells)``. In a CSV that pandas wrote, that is how a metric that turned NaN
    looks (``to_csv`` writes NaN as an empty cell; a diverged run's last rows may hold only
    the step), and an empty cell reads as not logged. A column logged every k steps has
    holes from its second row: not one. An empty cell whose step has a value in another row
    (HF Trainer's eval records share a step with its training records) is no hole, nor is
    a gradient norm's on a row that ``skipped`` marks (default: :func:`skipped_rows` of the
    table), where the optimizer step was skipped and logged none (a loss there still warns:
    an fp16 run that collapses halves its scale on every step while its loss turns NaN).

    >>> w = Wide(pl.Series([1, 2, 3, 4, 4]), None, [pl.Series("loss", [1.0, 2.0, None, 5.0, None]),
    ...                                             pl.Series("lr", [1.0, 1.0, 1.0, 1.0, None])])
    >>> holes(w, least=2)
    [('loss', 3, 1)]
    """
    gaps = [c for c in table.columns if c.has_nulls()]
    if not gaps:
        return []
    steps = table.step.to_numpy()
    if skipped is None:
        skipped = skipped_rows(table.columns, table.step.len())
    out = []
    for column in gaps:
        held = column.is_not_null().to_numpy()
        if not held.any():
            continue
        first = int(np.argmax(held))
        empty = np.flatnonzero(~held[first:]) + first
        empty = empty[~np.isin(steps[empty], steps[held])]
        if canonical(column.name) == "grad_norm":
            empty = empty[~skipped[empty]]
        if empty.size and empty[0] - first >= least:
            out.append((column.name, int(steps[empty[0]]), int(empty.size)))
    return out


#: canonical metrics that mark skipped optimizer steps (see :func:`skipped_rows`)
_SKIP_SIGNS = ("loss_scale", *SKIP_COUNTERS)


@functools.lru_cache(maxsize=4096)
def canonical(name: str) -> str:
    """The metric the default aliases map the column ``name`` to (the name itself when none),
    kept per name: a fleet's runs share their keys, and a lookup costs a few microseconds."""
    return AliasTable.default().resolve([name]).get(name, name)


def skip_sign(name: str) -> bool:
    """The column ``name`` is an fp16 loss scale or a skipped-step counter (by the default
    aliases)."""
    return canonical(name) in _SKIP_SIGNS


def skipped_rows(columns: Sequence[pl.Series], n_rows: int) -> np.ndarray:
    """Rows of a wide table where an optimizer step was skipped, as an fp16 run's overflow
    skips one, a boolean per row. A scale or a running total logged on some rows only is
    compared with its previous logged value, and the rows from that one to the change are
    marked (the skip happened somewhere between):

    * a loss scale: the rows from the last one before a drop to the first of the lower scale
      (Megatron logs no gradient norm on either side of a halving);
    * a skip count per step or interval: the rows where it is above 0;
    * a running total (a ``cumulative`` counter in the alias table): the rows after its last
      value up to the one where it rose.

    >>> scale = pl.Series("loss-scale", [8.0, 8.0, None, 4.0, 4.0])
    >>> skipped_rows([scale], 5).tolist()
    [False, True, True, True, False]
    >>> skipped_rows(
    ...     [pl.Series("skipped", [0, 1, 1, 0]), pl.Series("ds_skipped", [0, 0, 2, 2])], 4
    ... ).tolist()
    [False, True, True, False]
    """
    marks = np.zeros(n_rows + 1, dtype=np.int64)  # +1 where a marked span starts, -1 past it
    for column in columns:
        metric = canonical(column.name)
        if metric not in _SKIP_SIGNS or not column.dtype.is_numeric():
            continue
        values = column.cast(pl.Float64).to_numpy()  # an empty cell is NaN
        if metric != "loss_scale" and AliasTable.default().counter(metric) != "cumulative":
            marks[:-1] += values > 0  # NaN compares False: a span of one row each
            marks[1:] -= values > 0
            continue
        at = np.flatnonzero(np.isfinite(values))  # the logged rows
        logged = values[at]
        scale = metric == "loss_scale"
        k = np.flatnonzero(logged[1:] < logged[:-1] if scale else logged[1:] > logged[:-1])
        np.add.at(marks, at[k] + (0 if scale else 1), 1)
        np.add.at(marks, at[k + 1] + 1, -1)
    return np.cumsum(marks[:-1]) > 0


def warn_holes(where: object, found: list[tuple[str, int, int]], *, writer: str, cure: str) -> None:
    """Warn of :func:`holes`: read as not logged (a step that logged nothing there, as a
    skipped iteration leaves it), those cells may also have been NaN that ``writer`` lost;
    ``cure`` is how to keep it."""
    if not found:
        return
    named = ", ".join(f"{name!r} ({n} from step {step})" for name, step, n in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    warnings.warn(
        IngestWarning(
            f"{where}: empty cells in columns that had a value on every row before: {named}"
            f"{more}. They are read as not logged; {writer}: if the run produced NaN there, "
            f"{cure}"
        ),
        stacklevel=3,
    )
