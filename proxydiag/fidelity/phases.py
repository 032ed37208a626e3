"""Phases of a comparison: the learning before a fault, and the fault's response.

When the full seeds agree on a fault (a majority label that is not ``healthy``), its excursion
dominates every whole-run statistic. The aligned axis is then split at the earlier of the full
seeds' onset (the median seed's, as the fault comparison reports it) and the (registered)
proxy's, less a margin of ``phase_margin_progress``:

* ``pre_fault``: from the start of the range compared to the margin before that onset — the
  learning dynamics;
* ``fault``: from there to the end — which symptoms, in which order, how fast.

A healthy full run (or seeds split on the label) has one phase, ``whole``: the whole range. A
phase shorter than ``phase_min_progress`` of progress is *undecidable*: it is reported, never
scored as agreement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from proxydiag.align.alignment import Alignment
from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.fault_match import seeds_split
from proxydiag.fidelity.result import FaultComparison

WHOLE, PRE_FAULT, FAULT = "whole", "pre_fault", "fault"


@dataclass(frozen=True)
class Phase:
    """One phase: its range on the axis and in progress, and why it cannot be judged (if so)."""

    name: str
    lo: float
    hi: float
    progress: tuple[float, float]
    undecidable: str = ""


def split(
    aligned: Alignment,
    fault: FaultComparison,
    diagnoses: Sequence[Diagnosis | None],
    *,
    config: FidelityConfig,
) -> tuple[Phase, ...]:
    """The phases of a comparison (see the module docstring).

    ``diagnoses`` are the full runs' then the proxy's; ``aligned`` is the alignment the curves
    are resampled on (with the proxy's onset registered, when it was).
    """
    lo, hi = aligned.x_range
    p_lo, p_hi = _progress_of(aligned, lo), _progress_of(aligned, hi)
    onset = _earliest_onset(aligned, fault, diagnoses)
    if onset is None:
        return (Phase(WHOLE, lo, hi, (p_lo, p_hi)),)
    cut = min(max(onset - config.phase_margin_progress, p_lo), p_hi)
    x_cut = aligned.position(cut)
    return (
        _phase(PRE_FAULT, lo, x_cut, (p_lo, cut), config),
        _phase(FAULT, x_cut, hi, (cut, p_hi), config),
    )


def _phase(
    name: str, lo: float, hi: float, progress: tuple[float, float], config: FidelityConfig
) -> Phase:
    length = progress[1] - progress[0]
    why = (
        ""
        if length >= config.phase_min_progress
        else (
            f"undecidable: {length:.1%} of progress < {config.phase_min_progress:.0%} "
            "(phase_min_progress)"
        )
    )
    return Phase(name, lo, hi, (round(progress[0], 4), round(progress[1], 4)), why)


def _earliest_onset(
    aligned: Alignment, fault: FaultComparison, diagnoses: Sequence[Diagnosis | None]
) -> float | None:
    """The earlier of the full seeds' consensus onset (their median seed's, so that one seed's
    early misdiagnosis does not empty the phase) and the registered proxy's, in progress (None
    when the full seeds are healthy, split, or their onset is unknown)."""
    label, onset = fault.full.get("label"), fault.full.get("onset_progress")
    if label in (None, "healthy") or onset is None or seeds_split(fault.full.get("seeds") or []):
        return None
    proxy = diagnoses[-1] if diagnoses else None
    if proxy is not None and proxy.label == label and proxy.onset_step is not None:
        return min(float(onset), aligned.progress(aligned.n_full, float(proxy.onset_step)))
    return float(onset)


def _progress_of(aligned: Alignment, x: float) -> float:
    first, last = aligned.reference_span
    return round((x - first) / max(last - first, 1e-12), 4)
