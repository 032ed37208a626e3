"""`Alignment`: full runs and a proxy placed on one axis, before any metric is resampled.

The fault comparison needs only where each run's steps lie on the common axis (to express a
fault onset as progress); the curve tests need the metrics resampled onto it. Aligning first,
and registering the proxy's fault onset on the alignment (:meth:`Alignment.registered`), lets
:mod:`proxydiag.fidelity.api` resample every metric once, after the registration is known:
diagnose → align → register → resample → split into phases → test, one way.

The range compared is the overlap of the reference full run (the first) and the proxy on the axis
(``step``, ``tokens``), or [0, 1] (``progress``); :attr:`Alignment.overlap` says which, in words.
A registration warps the proxy's axis only; the range stays the one found before it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from proxydiag.align import progress, step, tokens
from proxydiag.align._register import register
from proxydiag.align.axis import Axis
from proxydiag.align.contract import Aligner
from proxydiag.errors import AnalysisError
from proxydiag.registry import Registry
from proxydiag.run import Run

#: alignment name -> aligner (:class:`~proxydiag.align.contract.Aligner`)
ALIGNERS: Registry[Aligner] = Registry("aligner", {m.NAME: m for m in (step, tokens, progress)})


@dataclass(frozen=True)
class Alignment:
    """Every run's axis and the range compared (rows: full runs in order, then the proxy)."""

    align: str
    unit: str
    x_range: tuple[float, float]
    overlap: str
    run_ids: tuple[str, ...]
    n_full: int
    axes: tuple[Axis, ...]
    spans: tuple[tuple[float, float], ...]  # each run's first/last position on the axis

    @property
    def reference_span(self) -> tuple[float, float]:
        """The span progress is measured on: the reference full run's, or (0, 1) for
        ``progress`` alignment."""
        return self.spans[0] if self.align != "progress" else (0.0, 1.0)

    def progress(self, row: int, at_step: float) -> float:
        """Relative progress of ``at_step`` of run ``row``: on the reference full run's span for
        ``step``/``tokens`` alignment (so a proxy that stopped early is not stretched), on the
        run's own span for ``progress``."""
        x = float(self.axes[row](at_step))
        first, last = self.reference_span
        return (x - first) / max(last - first, 1e-12)

    def position(self, progress_fraction: float) -> float:
        """The axis position at ``progress_fraction`` of the reference span.

        >>> from proxydiag.align.axis import linear
        >>> ax = linear("step", first_step=0, last_step=100, first=0, last=100)
        >>> Alignment("step", "step", (0, 100), "", ("a", "b"), 1, (ax, ax),
        ...           ((0, 100), (0, 100))).position(0.25)
        25.0
        """
        first, last = self.reference_span
        return float(first + progress_fraction * (last - first))

    def registered(self, proxy: Run, *, onset_step: float, full_progress: float) -> Alignment:
        """This alignment with the proxy's axis warped so that its ``onset_step`` lands on the
        full run's onset at ``full_progress`` (:mod:`proxydiag.align._register`); unchanged when
        the warp is impossible (an onset outside the proxy's span)."""
        target = self.position(full_progress)
        warped = register(
            self.axes[-1],
            first_step=proxy.first_step,
            last_step=proxy.last_step,
            onset_step=onset_step,
            to_position=target,
        )
        if warped is None:
            return self
        note = (
            f"; proxy axis warped to register its fault onset (step {onset_step:g}) on the "
            f"full run's ({target:.4g} on the {self.unit} axis)"
        )
        return replace(self, axes=(*self.axes[:-1], warped), overlap=self.overlap + note)


def align_runs(full: list[Run], proxy: Run, *, align: str = "step") -> Alignment:
    """Place ``full`` runs and ``proxy`` on the ``align`` axis and find the range compared.

    Raises :class:`~proxydiag.errors.AnalysisError` for an unknown alignment, no full run, or
    runs that do not overlap on the axis.
    """
    if align not in ALIGNERS:
        raise AnalysisError(
            f"unknown alignment {align!r}; use one of {', '.join(ALIGNERS.names())}"
        )
    if not full:
        raise AnalysisError("compare needs at least one full run; pass --full SOURCE")
    runs = [*full, proxy]
    module = ALIGNERS[align]
    if module is tokens:
        counter = tokens.counter_for(runs)
        axes = tuple(tokens.axis(r, counter=counter) for r in runs)
    else:
        axes = tuple(module.axis(r) for r in runs)
    x_range, overlap = _range(module.RANGE, axes, runs)
    return Alignment(
        align,
        axes[0].unit,
        x_range,
        overlap,
        tuple(r.id for r in runs),
        len(full),
        axes,
        tuple((ax.first, ax.last) for ax in axes),
    )


def _range(kind: str, axes: tuple[Axis, ...], runs: list[Run]) -> tuple[tuple[float, float], str]:
    if kind == "progress":
        spans = ", ".join(f"{r.id} steps {r.first_step}–{r.last_step}" for r in runs)
        return (0.0, 1.0), f"progress: each run's own span mapped onto [0, 1] ({spans})"
    # the reference full run and the proxy decide the range; a seed that stopped early (a
    # crashed run) leaves gaps in the baseline, it does not shorten the comparison
    lo, hi = max(axes[0].first, axes[-1].first), min(axes[0].last, axes[-1].last)
    unit = axes[0].unit
    if hi <= lo:
        raise AnalysisError(
            f"runs do not overlap on the {unit} axis ({', '.join(r.id for r in runs)}); "
            "use --align progress"
        )
    spans = ", ".join(f"{r.id} {ax.first:g}–{ax.last:g}" for r, ax in zip(runs, axes, strict=True))
    return (lo, hi), f"overlap: {unit} {lo:g}–{hi:g} ({spans})"
