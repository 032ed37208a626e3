"""What a report is about: the runs, their diagnoses and the comparison, resolved once.

Every renderer (HTML, Markdown, JSON) reads a :class:`ReportContent`; none of them runs an
analysis. :func:`proxydiag.report.api.report` builds it, computing what was not given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity.result import Comparison
from proxydiag.metrics import layer_of
from proxydiag.run import Run

#: the order panels appear in (metrics a reader looks at first); others follow alphabetically
PANEL_ORDER = (
    "reward",
    "loss",
    "pg_loss",
    "grad_norm",
    "entropy",
    "kl",
    "clip_frac",
    "mismatch_prob_diff",
    "mismatch_prob_diff_max",
    "mismatch_kl",
    "mismatch_k3",
    "mismatch_logp_diff",
    "mismatch_corr",
    "loss_scale",
    "skipped",
    "nonfinite",
    "response_length",
    "lr",
)
MAX_PANELS = 12


def report_runs(full: Sequence[Run], proxy: Run | None, runs: Sequence[Run]) -> list[Run]:
    """A report's runs in drawing order: full runs (the reference first), the proxy, others."""
    return [*full, *([proxy] if proxy is not None else []), *runs]


@dataclass(frozen=True)
class ReportContent:
    """The resolved inputs of one report.

    ``full`` (first = the reference run, others = its seeds) and ``proxy`` when a comparison is
    reported; ``runs`` for plain diagnosis reports; ``diagnoses`` maps run id -> Diagnosis.
    """

    full: tuple[Run, ...] = ()
    proxy: Run | None = None
    runs: tuple[Run, ...] = ()
    diagnoses: Mapping[str, Diagnosis] = field(default_factory=dict)
    comparison: Comparison | None = None
    align: str = "step"
    notes: tuple[str, ...] = ()

    @property
    def drawn_runs(self) -> list[Run]:
        """Every run with data, reference run first, without duplicates."""
        seen: dict[str, Run] = {}
        for run in report_runs(self.full, self.proxy, self.runs):
            seen.setdefault(run.id, run)
        return list(seen.values())

    def name_of(self, run_id: str) -> str:
        for run in self.drawn_runs:
            if run.id == run_id:
                return run.name
        return run_id

    def full_names(self) -> str | None:
        """``name`` or ``name (+N seeds)`` of the full run(s), for sentences."""
        if not self.full:
            return None
        more = len(self.full) - 1
        return self.full[0].name + (f" (+{more} seed{'s' * (more > 1)})" if more else "")

    def role_of(self, run: Run) -> str:
        if self.proxy is not None and run.id == self.proxy.id:
            return "proxy"
        if self.full and run.id == self.full[0].id:
            return "full"
        return "seed" if any(r.id == run.id for r in self.full) else "run"

    def named_diagnoses(self) -> list[tuple[str, Diagnosis]]:
        """``(display name, diagnosis)``: drawn runs in order, then diagnoses of other runs.

        Seeds beyond the reference run are left out of the headline (they are in the band).
        """
        out: list[tuple[str, Diagnosis]] = []
        used: set[str] = set()
        for run in self.drawn_runs:
            d = self.diagnoses.get(run.id)
            if d is not None and self.role_of(run) != "seed":
                out.append((run.name, d))
                used.add(run.id)
        out += [
            (d.run, d)
            for rid, d in self.diagnoses.items()
            if rid not in used and rid not in {r.id for r in self.full[1:]}
        ]
        return out

    def panel_metrics(self, *, limit: int = MAX_PANELS) -> list[str]:
        """Metrics to draw: root-cause metrics first, then the compared ones, the usual ones,
        a layer an event named (``router_z_loss_layer_7``), then the rest, a run's other
        per-layer metrics last (dozens of layers would fill every panel)."""
        present: set[str] = set()
        for run in self.drawn_runs:
            present.update(run.metrics)
        first = [
            d.root_cause.metric
            for _, d in self.named_diagnoses()
            if d.root_cause is not None and d.root_cause.metric
        ]
        compared = list(self.comparison.metrics) if self.comparison else []
        ordered = [m for m in PANEL_ORDER if m in present]
        named = [
            e.metric
            for _, d in self.named_diagnoses()
            for e in d.events
            if e.metric and layer_of(e.metric) is not None
        ]
        rest = sorted(
            (m for m in present if m not in PANEL_ORDER and m not in {"tokens", "samples"}),
            key=lambda m: (layer_of(m) is not None, m),
        )
        chosen = [
            m for m in dict.fromkeys(first + compared + ordered + named + rest) if m in present
        ]
        return chosen[:limit]

    def to_dict(self) -> dict[str, Any]:
        """The JSON report: ``{"diagnoses": [Diagnosis.to_dict()...], "comparison": ...}``."""
        return {
            "diagnoses": [d.to_dict() for _, d in self.named_diagnoses()],
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "align": self.align,
            "notes": list(self.notes),
        }


def match_diagnoses(
    runs: Sequence[Run], given: Sequence[Diagnosis] | Mapping[str, Diagnosis] | None
) -> dict[str, Diagnosis]:
    """Key given diagnoses by run id (a diagnosis matches a run by id, else by name)."""
    if given is None:
        return {}
    items = list(given.values()) if isinstance(given, Mapping) else list(given)
    by_name = {r.name: r.id for r in runs}
    return {
        by_name.get(d.run, d.run) if d.run not in {r.id for r in runs} else d.run: d for d in items
    }
