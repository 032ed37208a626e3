"""Fault reproduction: diagnose the full run and the proxy, compare class and onset in progress.

The fault is *reproduced* when both runs carry the same label and, for a fault, the onsets are
within ``onset_tolerance_progress`` (10%) of run progress of each other
(docs/architecture.md#json-contracts). Two healthy runs reproduce "no fault". The outcome names what
went wrong otherwise: ``fault_missing`` (the proxy is healthy, or does not log what the fault shows
in: then the explanation says so), ``extra_fault`` (the proxy fails where the full run is healthy: a
pruning artefact), ``wrong_fault``, ``fault_early``, ``fault_late``. Diagnoses come from
:func:`proxydiag.diagnose.api.diagnose` unless given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxydiag.align.alignment import Alignment
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.result import Diagnosis
from proxydiag.diagnose.taxonomy import UNSEEN_BY
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.result import FaultComparison
from proxydiag.run import Run

NAME = "faults"


def diagnose_runs(
    runs: Sequence[Run],
    given: Sequence[Diagnosis | None],
    config: DiagnoseConfig | None = None,
) -> list[Diagnosis]:
    """The given diagnoses, diagnosing the runs that have none (with ``config``: the
    defaults for None)."""
    from proxydiag.diagnose.api import diagnose

    return [
        g if i < len(given) and (g := given[i]) is not None else diagnose(run, config=config)
        for i, run in enumerate(runs)
    ]


def outcome(
    full: Diagnosis, proxy: Diagnosis, lag_progress: float | None, *, tolerance: float
) -> str:
    """``reproduced`` or what differs (see the module docstring)."""
    if full.label == proxy.label:
        if full.label == "healthy" or lag_progress is None or abs(lag_progress) <= tolerance:
            return "reproduced"
        return "fault_late" if lag_progress > 0 else "fault_early"
    if proxy.label == "healthy":
        return "fault_missing"
    return "extra_fault" if full.label == "healthy" else "wrong_fault"


def score(
    full_runs: Sequence[Run],
    proxy: Run,
    grid: Alignment,
    *,
    full: Sequence[Diagnosis | None],
    proxy_diagnosis: Diagnosis | None,
    config: FidelityConfig,
) -> FaultComparison:
    """Compare the full runs' consensus diagnosis with the proxy's.

    With several full seeds the full run's fault is their majority label (a tie: the proxy's
    label if it is one of the tied, see :func:`consensus`) and its onset the median progress of
    the seeds that carry it: one seed's misdiagnosis or early onset does not decide. A proxy
    onset within the range of the seeds' onsets is on time; outside it, the lag beyond the
    range is held to the tolerance.
    """
    known = [(i, d) for i, d in enumerate(full) if d is not None]
    if not known or proxy_diagnosis is None:
        return FaultComparison(
            {"label": None, "onset_step": None},
            {"label": None, "onset_step": None},
            None,
            None,
            False,
            "faults not compared: proxydiag.diagnose is not available",
        )
    label, step, p_full, agree, spread = consensus(known, grid, prefer=proxy_diagnosis.label)
    ref = Diagnosis(
        source="",
        run=grid.run_ids[0],
        label=label,
        onset_step=step,
        confidence=1.0,
        root_cause=None,
    )
    p_proxy = _progress(grid, grid.n_full, proxy_diagnosis)
    both = step is not None and proxy_diagnosis.onset_step is not None
    lag_steps = proxy_diagnosis.onset_step - step if both else None  # type: ignore[operator]
    lag = p_proxy - p_full if p_full is not None and p_proxy is not None else None
    # a proxy whose onset lies among the seeds' own is as early or late as another seed
    beyond = (
        None
        if lag is None or p_proxy is None or spread is None
        else p_proxy - min(max(p_proxy, spread[0]), spread[1])
    )
    what = outcome(ref, proxy_diagnosis, beyond, tolerance=config.onset_tolerance_progress)
    unseen = _unseen(label, proxy_diagnosis) if what == "fault_missing" else None
    words = _explain(what, ref, proxy_diagnosis, lag, config.onset_tolerance_progress, unseen)
    if (
        spread is not None
        and spread[1] > spread[0]
        and what in ("reproduced", "fault_late", "fault_early")
    ):  # "within / beyond 10%" of them
        words += f" of the seeds' onsets ({spread[0]:.0%}–{spread[1]:.0%} of progress)"
    if len(known) > 1:
        words += f" (full run: {agree} of {len(known)} seeds say {label})"
    side = _side(ref, p_full)
    side["seeds"] = [d.label for _, d in known]
    return FaultComparison(
        side, _side(proxy_diagnosis, p_proxy), lag_steps, lag, what == "reproduced", words, what
    )


def consensus(
    known: Sequence[tuple[int, Diagnosis]], grid: Alignment, *, prefer: str | None = None
) -> tuple[str, int | None, float | None, int, tuple[float, float] | None]:
    """Majority label of the full seeds, the onset step and progress of its median seed (the
    lower middle one for an even count: step and progress from one seed), how many seeds
    agree, and the range of their onsets in progress (None without one).

    Seeds split evenly have no majority: ``prefer`` (the proxy's label) wins when one of the
    tied labels is it, else the reference's (the first seed's) label, so that the order of the
    full runs does not decide (see :func:`seeds_split`)."""
    labels = [d.label for _, d in known]
    counts = {lab: labels.count(lab) for lab in labels}
    top = max(counts.values())
    tied = [lab for lab in dict.fromkeys(labels) if counts[lab] == top]  # first seed's first
    label = prefer if prefer in tied else tied[0]
    carriers = [(i, d) for i, d in known if d.label == label and d.onset_step is not None]
    if label == "healthy" or not carriers:
        return label, None, None, counts[label], None
    progress = [grid.progress(i, d.onset_step) for i, d in carriers]  # type: ignore[arg-type]
    middle = sorted(range(len(carriers)), key=lambda k: progress[k])[(len(carriers) - 1) // 2]
    return (
        label,
        carriers[middle][1].onset_step,
        float(progress[middle]),
        counts[label],
        (float(min(progress)), float(max(progress))),
    )


def seeds_split(labels: Sequence[str]) -> bool:
    """The full seeds' labels have no majority (two or more labels tie for the most seeds).

    >>> seeds_split(["healthy", "loss_divergence"]), seeds_split(["healthy", "healthy", "x"])
    (True, False)
    """
    counts = [list(labels).count(lab) for lab in set(labels)]
    return len(counts) > 1 and counts.count(max(counts)) > 1


def _unseen(label: str, proxy: Diagnosis) -> str | None:
    """What the proxy does not log of the signals that show the full run's fault class, as
    its own diagnosis lists them (``Diagnosis.missing``, the taxonomy's one rule), or None
    when it logs some: then its being healthy means something."""
    entry = UNSEEN_BY.get(label)
    return _SIGNALS[label] if entry is not None and entry in proxy.missing else None


#: fault class -> the signals it shows in, in words
_SIGNALS = {
    "precision_fault": "rollout/learner mismatch metric",
    "gradient_overflow": (
        "overflow signal (grad norm, loss scale, skip counter or non-finite count)"
    ),
    "loss_divergence": "grad norm or loss",
}


def _progress(grid: Alignment, row: int, d: Diagnosis) -> float | None:
    return (
        None if d.onset_step is None or d.label == "healthy" else grid.progress(row, d.onset_step)
    )


def _side(d: Diagnosis, progress: float | None) -> dict[str, Any]:
    return {
        "label": d.label,
        "onset_step": d.onset_step,
        "onset_progress": None if progress is None else round(progress, 4),
    }


def _explain(
    what: str,
    full: Diagnosis,
    proxy: Diagnosis,
    lag: float | None,
    tol: float,
    unseen: str | None = None,
) -> str:
    at = (
        f" (onsets {full.onset_step} vs {proxy.onset_step}, lag {lag:+.1%} of progress)"
        if lag is not None
        else ""
    )
    texts = {
        "reproduced": (
            f"fault reproduced: both {full.label}{at}, within {tol:.0%}"
            if full.label != "healthy"
            else "no fault: both runs healthy"
        ),
        "fault_late": (
            f"fault_late: both {full.label} but the proxy's onset is later{at}, beyond {tol:.0%}"
        ),
        "fault_early": (
            f"fault_early: both {full.label} but the proxy's onset is earlier{at}, beyond {tol:.0%}"
        ),
        "fault_missing": f"fault_missing: the full run has {full.label} at step {full.onset_step}, "
        + (
            f"but the proxy logs no {unseen} (where the full run's fault shows): "
            "its health there cannot be told; log them in the proxy"
            if unseen
            else "the proxy is healthy"
        ),
        "extra_fault": (
            f"extra_fault: the proxy has {proxy.label} at step {proxy.onset_step} "
            "where the full run is healthy"
        ),
        "wrong_fault": f"wrong_fault: the full run has {full.label}, the proxy {proxy.label}",
    }
    return texts[what]
