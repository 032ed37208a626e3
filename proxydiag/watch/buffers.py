"""Bounded memory of one metric: its first points, a thinned history, and the recent points.

A live run can log millions of steps; the watcher keeps, per metric, at most
``head_points + history_points + recent_points`` points whatever the run's length:

- the **head**: the first points at full resolution (a run's start holds the loss scaler's
  calibration and the warm-up, which the detectors judge against);
- the **history**: every ``stride``-th point that left the recent window; when it is full, every
  other point is dropped and the stride doubles (so it always spans the whole middle of the run,
  ever more thinly: the early baseline a slow climb is measured against);
- the **recent** window: the last points at full resolution, in a ring (where onsets are found).

Appending is O(1) (amortised: a thinning pass is O(history_points) once per doubling).
NaN and ±inf are stored as they are.

>>> b = MetricBuffer(head_points=2, history_points=4, recent_points=4)
>>> for step in range(20):
...     b.append(step, float(step))
>>> steps, values = b.arrays()
>>> steps.tolist()
[0, 1, 2, 6, 10, 14, 16, 17, 18, 19]
>>> b.size <= 2 + 4 + 4
True
"""

from __future__ import annotations

from typing import Any

import numpy as np


class MetricBuffer:
    """Head, thinned history and recent ring of one metric's ``(step, value)`` points."""

    def __init__(self, *, head_points: int, history_points: int, recent_points: int) -> None:
        if head_points < 0 or history_points < 2 or recent_points < 1:
            raise ValueError("head_points >= 0, history_points >= 2 and recent_points >= 1")
        self._head_cap, self._hist_cap, self._ring_cap = head_points, history_points, recent_points
        self._head: list[tuple[int, float]] = []
        self._hist_steps = np.empty(history_points, dtype=np.int64)
        self._hist_values = np.empty(history_points, dtype=np.float64)
        self._n_hist = 0
        self._stride = 1
        self._evicted = 0
        self._ring_steps = np.empty(recent_points, dtype=np.int64)
        self._ring_values = np.empty(recent_points, dtype=np.float64)
        self._n_ring = 0
        self._pos = 0  # where the next ring point goes
        self.last_step: int | None = None
        self.last_value: float | None = None
        #: points appended in all (the run's length in logged points of this metric)
        self.count = 0

    @property
    def size(self) -> int:
        """Points held now (bounded)."""
        return len(self._head) + self._n_hist + self._n_ring

    def append(self, step: int, value: float) -> None:
        """Add a point whose step is after the last one (see :meth:`rewind` for restarts)."""
        self.last_step, self.last_value = step, value
        self.count += 1
        if len(self._head) < self._head_cap:
            self._head.append((step, value))
            return
        if self._n_ring == self._ring_cap:
            self._evict(int(self._ring_steps[self._pos]), float(self._ring_values[self._pos]))
        else:
            self._n_ring += 1
        self._ring_steps[self._pos] = step
        self._ring_values[self._pos] = value
        self._pos = (self._pos + 1) % self._ring_cap

    def rewind(self, step: int) -> None:
        """Forget the recent points at or after ``step`` (a run resumed from a checkpoint
        logs those steps again; the newer values replace them, as the offline reader does).
        Points already thinned into the history stay."""
        steps, _ = self.recent()
        keep = int(np.searchsorted(steps, step, side="left"))
        drop = steps.size - keep
        self._pos = (self._pos - drop) % self._ring_cap
        self._n_ring -= drop
        self._head = [(s, v) for s, v in self._head if s < step]
        _, values = self.arrays()
        self.last_value = float(values[-1]) if values.size else None
        if keep:
            self.last_step = int(steps[keep - 1])
        elif self._n_hist:
            self.last_step = int(self._hist_steps[self._n_hist - 1])
        else:
            self.last_step = self._head[-1][0] if self._head else None

    def recent(self) -> tuple[np.ndarray, np.ndarray]:
        """The recent window in step order (copies)."""
        order = (self._pos - self._n_ring + np.arange(self._n_ring)) % self._ring_cap
        return self._ring_steps[order], self._ring_values[order]

    def last(self, k: int) -> np.ndarray:
        """The values of the last ``k`` points held (fewer when fewer are held)."""
        if self._n_ring < k:
            return self.arrays()[1][-k:]
        return self._ring_values[(self._pos - k + np.arange(k)) % self._ring_cap]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every held point in step order: head, history, recent."""
        steps, values = self.recent()
        head = np.asarray([s for s, _ in self._head], dtype=np.int64)
        head_v = np.asarray([v for _, v in self._head], dtype=np.float64)
        n = self._n_hist
        return (
            np.concatenate((head, self._hist_steps[:n], steps)),
            np.concatenate((head_v, self._hist_values[:n], values)),
        )

    def _evict(self, step: int, value: float) -> None:
        """A point leaving the recent window joins the history if it falls on the stride."""
        self._evicted += 1
        if (self._evicted - 1) % self._stride:
            return
        if self._n_hist == self._hist_cap:
            half = self._hist_cap // 2 + self._hist_cap % 2
            self._hist_steps[:half] = self._hist_steps[: self._hist_cap : 2]
            self._hist_values[:half] = self._hist_values[: self._hist_cap : 2]
            self._n_hist = half
            self._stride *= 2
            if (self._evicted - 1) % self._stride:
                return
        self._hist_steps[self._n_hist] = step
        self._hist_values[self._n_hist] = value
        self._n_hist += 1

    def to_state(self) -> dict[str, Any]:
        """JSON-able state (non-finite values as strings, see :func:`encode`)."""
        steps, values = self.recent()
        n = self._n_hist
        return {
            "caps": [self._head_cap, self._hist_cap, self._ring_cap],
            "head": [[s, encode(v)] for s, v in self._head],
            "history": [
                [int(s), encode(float(v))]
                for s, v in zip(self._hist_steps[:n], self._hist_values[:n], strict=True)
            ],
            "stride": self._stride,
            "evicted": self._evicted,
            "count": self.count,
            "recent": [[int(s), encode(float(v))] for s, v in zip(steps, values, strict=True)],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MetricBuffer:
        head, hist, ring = (int(x) for x in state["caps"])
        b = cls(head_points=head, history_points=hist, recent_points=ring)
        b._head = [(int(s), decode(v)) for s, v in state["head"]]
        for i, (s, v) in enumerate(state["history"]):
            b._hist_steps[i], b._hist_values[i] = int(s), decode(v)
        b._n_hist = len(state["history"])
        b._stride, b._evicted = int(state["stride"]), int(state["evicted"])
        for s, v in state["recent"]:
            b._ring_steps[b._pos], b._ring_values[b._pos] = int(s), decode(v)
            b._pos = (b._pos + 1) % b._ring_cap
            b._n_ring += 1
        b.count = int(state["count"])
        last = [s for s, _ in b._head] + [int(s) for s, _ in state["recent"]]
        b.last_step = max(last) if last else None
        _, values = b.arrays()
        b.last_value = float(values[-1]) if values.size else None
        return b


def encode(value: float) -> float | str:
    """A value for JSON: NaN and ±inf become ``"nan"``, ``"inf"``, ``"-inf"``.

    >>> encode(float("inf")), decode(encode(float("-inf"))), encode(1.5)
    ('inf', -inf, 1.5)
    """
    return value if np.isfinite(value) else str(value)


def decode(value: float | str) -> float:
    return float(value)
