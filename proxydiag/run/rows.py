"""A run's points as rows: one ``(step, {key: value})`` per logged step, in step order.

What a live source would have delivered step by step (the keys are the ones logged, so aliases
and cumulative counters are resolved again by whoever reads the rows).

>>> from proxydiag.frame import raw
>>> from proxydiag.run.build import build_run
>>> r = build_run(raw([1, 2, 2], ["loss", "loss", "grad_norm"], [0.7, 0.5, 3.0]),
...               name="t", source="t", fmt="test")
>>> list(steps_of(r))
[(1, {'loss': 0.7}), (2, {'grad_norm': 3.0, 'loss': 0.5})]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from proxydiag.run import Run


def steps_of(run: Run) -> Iterator[tuple[int, dict[str, float]]]:
    """The run's points grouped by step, in step order, keyed as logged."""
    frame = run.frame
    if frame.height == 0:
        return
    steps = frame["step"].to_numpy()
    order = np.argsort(steps, kind="stable")
    steps = steps[order]
    keys = frame["key"].to_numpy()[order]
    values = frame["value"].to_numpy().astype(np.float64)[order]
    bounds = np.flatnonzero(np.diff(steps)) + 1
    for a, b in zip(np.r_[0, bounds], np.r_[bounds, steps.size], strict=True):
        yield int(steps[a]), {str(k): float(v) for k, v in zip(keys[a:b], values[a:b], strict=True)}
