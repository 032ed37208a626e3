"""``proxydiag bench compare DIR``: score :func:`proxydiag.compare` against a labelled corpus.

Reads ``labels.json`` (docs/architecture.md#labelled-corpora-labelsjson) with
:func:`proxydiag.evaluate.diagnose.load_labels`: every pair names its full runs, its proxy, whether
it is faithful and, if not, ``why``. Each run is read and diagnosed once. Scores:

* **AUC** of ``fidelity`` between faithful and unfaithful pairs (Mann-Whitney; ties count ½);
* **verdict accuracy**, with the verdicts each ``why`` implies (the issue's verdict rules):

  ======================================================  ==========================
  ``why``                                                 accepted verdicts
  ======================================================  ==========================
  "" (faithful, incl. a full seed against the others)     faithful
  fault_missing, fault_late, fault_early, wrong_fault,    unfaithful
  extra_fault
  trend (the proxy does not learn)                        unfaithful or partial
  dynamics (fault reproduced, dynamics not)               partial or unfaithful
  ======================================================  ==========================

  A ``trend`` pair is unfaithful when its proxy does not learn and partial when it learns the
  wrong way; a ``dynamics`` pair is partial by the rules, unfaithful when its volatility also
  breaks the fault's timing.
* **seed pairs faithful**: the share of full-seed-vs-other-seeds pairs judged faithful.
* **per-phase accuracy**, for pairs whose label says which phases are faithful (an optional
  ``"phases": {"pre_fault": true, "fault": false}``; the generator writes it): a phase that
  should be faithful must be judged ``faithful``, one that should not must be ``partial`` or
  ``unfaithful``; an ``undecidable`` phase counts as wrong (it was not judged), a phase the
  comparison does not have (a ``whole`` phase of a faulty pair) is not scored.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxydiag.errors import IngestWarning, ProxydiagError
from proxydiag.evaluate.diagnose import Labels, load_labels

if TYPE_CHECKING:
    from proxydiag.fleet.executor import Executor
    from proxydiag.pipeline import Settings

#: verdicts accepted for each ``why`` (see the module docstring)
EXPECTED: dict[str, frozenset[str]] = {
    "": frozenset({"faithful"}),
    "fault_missing": frozenset({"unfaithful"}),
    "fault_late": frozenset({"unfaithful"}),
    "fault_early": frozenset({"unfaithful"}),
    "wrong_fault": frozenset({"unfaithful"}),
    "extra_fault": frozenset({"unfaithful"}),
    "trend": frozenset({"unfaithful", "partial"}),
    "dynamics": frozenset({"partial", "unfaithful"}),
}


@dataclass(frozen=True)
class PairResult:
    pair: str
    why: str
    faithful: bool
    seed_pair: bool
    fidelity: float
    verdict: str
    reasons: tuple[str, ...] = ()
    #: phase -> the comparison's verdict of it; phase -> whether it is faithful (the truth)
    phases: dict[str, str] = field(default_factory=dict)
    phase_truth: dict[str, bool] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.verdict in EXPECTED.get(self.why, frozenset({"partial", "unfaithful"}))

    def phase_correct(self) -> dict[str, bool]:
        """Each labelled phase the comparison has: was its verdict right?"""
        return {
            name: (self.phases[name] == "faithful") == faithful
            and self.phases[name] != "undecidable"
            for name, faithful in self.phase_truth.items()
            if name in self.phases
        }


@dataclass(frozen=True)
class BenchScore:
    n_pairs: int
    auc: float
    accuracy: float
    seed_faithful: float
    n_seed_pairs: int
    per_why: dict[str, dict[str, float]] = field(default_factory=dict)
    pairs: tuple[PairResult, ...] = ()
    #: phase -> {"n", "correct", "accuracy"} over the pairs labelled per phase
    per_phase: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "pairs"}
        out["pairs"] = [
            {**asdict(p), "correct": p.correct, "phase_correct": p.phase_correct()}
            for p in self.pairs
        ]
        return out


def auc(positive: list[float], negative: list[float]) -> float:
    """P(a faithful pair scores above an unfaithful one), ties counting ½ (Mann-Whitney U / n²).

    >>> auc([0.9, 0.8], [0.2, 0.8])
    0.875
    """
    if not positive or not negative:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def score(results: list[PairResult]) -> BenchScore:
    """AUC, verdict accuracy, seed-pair faithfulness and per-``why`` accuracy."""
    pos = [r.fidelity for r in results if r.faithful]
    neg = [r.fidelity for r in results if not r.faithful]
    seeds = [r for r in results if r.seed_pair]
    per_why: dict[str, dict[str, float]] = {}
    for r in results:
        key = r.why or ("seed" if r.seed_pair else "faithful")
        cell = per_why.setdefault(key, {"n": 0, "correct": 0, "mean_fidelity": 0.0})
        cell["n"] += 1
        cell["correct"] += r.correct
        cell["mean_fidelity"] += (r.fidelity - cell["mean_fidelity"]) / cell["n"]
    return BenchScore(
        n_pairs=len(results),
        auc=auc(pos, neg),
        accuracy=sum(r.correct for r in results) / len(results) if results else float("nan"),
        seed_faithful=(sum(r.verdict == "faithful" for r in seeds) / len(seeds))
        if seeds
        else float("nan"),
        n_seed_pairs=len(seeds),
        per_why=per_why,
        pairs=tuple(results),
        per_phase=_per_phase(results),
    )


def _per_phase(results: list[PairResult]) -> dict[str, dict[str, float]]:
    """Accuracy of each phase's verdict over the pairs labelled per phase."""
    out: dict[str, dict[str, float]] = {}
    for r in results:
        for name, ok in r.phase_correct().items():
            cell = out.setdefault(name, {"n": 0, "correct": 0})
            cell["n"] += 1
            cell["correct"] += ok
    for cell in out.values():
        cell["accuracy"] = cell["correct"] / cell["n"]
    return out


def evaluate(
    corpus: str | Path,
    *,
    config: str | Path | None = None,
    align: str = "step",
    truth: bool = False,
    executor: Executor | None = None,
) -> list[PairResult]:
    """Compare every pair of a corpus (runs read and diagnosed once each).

    ``truth=True`` uses the corpus's true labels and onsets instead of :func:`diagnose`, which
    scores the comparison alone (a misdiagnosis otherwise counts against it). With an
    ``executor`` other than in-process, each pair is a work item on it (a pair's runs are
    then read by its worker: a full run shared by several pairs is read once per pair).
    """
    from proxydiag.fidelity.fault_match import diagnose_runs
    from proxydiag.ingest import read_run
    from proxydiag.pipeline import Settings

    cfg = Settings.load(config)  # once, not per pair: the detectors' and the comparison's
    labels = load_labels(corpus)
    if executor is not None and executor.name != "serial":
        return _evaluate_on(executor, labels, cfg, align=align, truth=truth)
    runs_meta = labels.runs
    cache: dict[str, Any] = {}

    def load(run_id: str) -> tuple[Any, Any]:
        if run_id not in cache:
            run = read_run(labels.run_path(run_id))
            given = [_true_diagnosis(run, runs_meta[run_id])] if truth else [None]
            cache[run_id] = (run, diagnose_runs([run], given, cfg.diagnose)[0])
        return cache[run_id]  # type: ignore[no-any-return]

    results = []
    for name, pair in labels.pairs.items():
        if pair.get("faithful") is None:
            continue  # no ground truth (the lab's proxies: reproduction is what it measures)
        try:
            fulls = [load(r) for r in pair["full"]]
            # a pair the comparison refuses (step axes that do not overlap: "use --align
            # progress") is named, not the end of the corpus
            c = _compare_loaded(fulls, load(pair["proxy"]), align=align, config=cfg.compare)
        except ProxydiagError as exc:
            warnings.warn(IngestWarning(f"pair {name}: not scored ({exc})"), stacklevel=2)
            continue
        results.append(_pair_result(name, pair, runs_meta[pair["proxy"]], c))
    return results


def _evaluate_on(
    executor: Executor,
    labels: Labels,
    cfg: Settings,
    *,
    align: str,
    truth: bool,
) -> list[PairResult]:
    items = [
        (
            name,
            pair,
            {
                rid: (str(labels.run_path(rid)), labels.runs[rid])
                for rid in [*pair["full"], pair["proxy"]]
            },
        )
        for name, pair in labels.pairs.items()
        if pair.get("faithful") is not None
    ]
    results = []
    for outcome in executor.map(partial(compare_pair, cfg, align, truth), items):
        if outcome.ok:
            results.append(outcome.value)
        else:
            warnings.warn(
                IngestWarning(f"pair {outcome.item[0]}: not scored ({outcome.reason})"),
                stacklevel=2,
            )
    return results


def compare_pair(
    cfg: Settings,
    align: str,
    truth: bool,
    item: tuple[str, dict[str, Any], dict[str, tuple[str, dict[str, Any]]]],
) -> PairResult:
    """One pair of a corpus as a work item: ``(name, pair, {run id: (path, labels entry)})``."""
    from proxydiag.fidelity.fault_match import diagnose_runs
    from proxydiag.ingest import read_run

    name, pair, runs = item
    loaded = {}
    for rid, (path, meta) in runs.items():
        run = read_run(path)
        given = [_true_diagnosis(run, meta)] if truth else [None]
        loaded[rid] = (run, diagnose_runs([run], given, cfg.diagnose)[0])
    fulls = [loaded[r] for r in pair["full"]]
    c = _compare_loaded(fulls, loaded[pair["proxy"]], align=align, config=cfg.compare)
    return _pair_result(name, pair, runs[pair["proxy"]][1], c)


def _pair_result(name: str, pair: dict[str, Any], proxy_meta: dict[str, Any], c: Any) -> PairResult:
    """A scored pair: the truth from its label, the comparison's verdicts (whole and phases)."""
    return PairResult(
        name,
        pair.get("why", ""),
        bool(pair["faithful"]),
        proxy_meta.get("role") == "full",
        c.fidelity,
        c.verdict,
        c.reasons,
        {p.name: p.verdict for p in c.phases},
        dict(pair.get("phases") or {}),
    )


def _compare_loaded(
    fulls: list[tuple[Any, Any]], proxy: tuple[Any, Any], *, align: str, config: Any
) -> Any:
    """:func:`proxydiag.compare` of ``(run, diagnosis)`` pairs: the full runs', the proxy's."""
    from proxydiag.fidelity.api import compare

    run, diagnosis = proxy
    return compare(
        [f for f, _ in fulls],
        run,
        align=align,
        config=config,
        full_diagnoses=[d for _, d in fulls],
        proxy_diagnosis=diagnosis,
    )


def _true_diagnosis(run: Any, meta: dict[str, Any]) -> Any:
    from proxydiag.diagnose.result import Diagnosis

    return Diagnosis(
        source=str(meta.get("path", "")),
        run=run.id,
        label=meta["label"],
        onset_step=meta.get("onset_step"),
        confidence=1.0,
        root_cause=None,
        first_step=run.first_step,
        last_step=run.last_step,
    )


def render(s: BenchScore, *, markdown: bool = False) -> str:
    """The scores as text or a Markdown table."""
    head = [
        ("pairs", f"{s.n_pairs}"),
        ("AUC of fidelity (faithful vs unfaithful)", f"{s.auc:.3f}"),
        ("verdict accuracy", f"{s.accuracy:.3f}"),
        ("full-seed pairs faithful", f"{s.seed_faithful:.3f} of {s.n_seed_pairs}"),
    ]
    head += [
        (f"{name} phase accuracy", f"{c['accuracy']:.3f} ({int(c['correct'])}/{int(c['n'])})")
        for name, c in sorted(s.per_phase.items())
    ]
    rows = [
        (why, f"{int(c['correct'])}/{int(c['n'])}", f"{c['mean_fidelity']:.3f}")
        for why, c in sorted(s.per_why.items())
    ]
    wrong = [
        (
            f"{p.pair} ({p.why or 'faithful'}): {p.verdict} {p.fidelity:.2f} — "
            f"{'; '.join(p.reasons)[:160]}"
        )
        for p in s.pairs
        if not p.correct
    ]
    if markdown:
        lines = [
            "| score | value |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in head),
            "",
            "| why | correct | mean fidelity |",
            "|---|---:|---:|",
            *(f"| {a} | {b} | {c} |" for a, b, c in rows),
        ]
    else:
        lines = [f"{k}: {v}" for k, v in head] + ["", "why: correct, mean fidelity"]
        lines += [f"  {a}: {b}, {c}" for a, b, c in rows]
    if wrong:
        lines += ["", "misjudged pairs:", *(f"  {w}" for w in wrong)]
    return "\n".join(lines)
