"""``proxydiag bench diagnose DIR``: score the failure taxonomy against a labelled corpus.

Reads ``labels.json`` (schema: docs/architecture.md#labelled-corpora-labelsjson), reads each run it
lists with :func:`proxydiag.read_run`, diagnoses it, and reports per-class precision/recall/F1,
macro-F1, onset errors in steps and the fraction of faulty runs whose onset is within tolerance:
max(5 steps, the log interval, 2% of the run). The ``labels.json`` loader
(:func:`load_labels`) also serves ``bench compare``.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from proxydiag.diagnose.config import DiagnoseConfig, load_config
from proxydiag.diagnose.result import LABELS
from proxydiag.errors import ConfigError, IngestWarning, ProxydiagError

if TYPE_CHECKING:
    from proxydiag.fleet.executor import Executor

#: the prediction recorded for a run that could not be read (counts as a miss)
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class RunScore:
    """One run of the corpus: truth, prediction and the onset check."""

    run: str
    truth: str
    predicted: str
    onset_truth: int | None
    onset_predicted: int | None
    tolerance_steps: float
    log_interval: int
    #: the kind of a precision fault: the corpus's (its ``precision_kind``, else the one its
    #: synth variant stands for) and the diagnosis's
    kind_truth: str | None = None
    kind_predicted: str | None = None

    @property
    def onset_error(self) -> int | None:
        if self.onset_truth is None or self.onset_predicted is None:
            return None
        return self.onset_predicted - self.onset_truth

    @property
    def onset_hit(self) -> bool:
        err = self.onset_error
        return err is not None and self.predicted != "healthy" and abs(err) <= self.tolerance_steps


@dataclass(frozen=True)
class BenchScore:
    """Scores of one corpus (``to_dict()`` is the JSON output)."""

    per_class: dict[str, dict[str, float]]
    macro_f1: float
    onset_hit_rate: float
    onset_median_abs_error: float | None
    runs: tuple[RunScore, ...] = field(default=())

    @property
    def per_kind(self) -> dict[str, dict[str, Any]]:
        """Per kind of precision fault (runs whose truth names one and that were diagnosed a
        precision fault): support, correct, accuracy, and what was predicted instead."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.runs:
            if r.kind_truth is None or r.predicted != "precision_fault":
                continue
            k = out.setdefault(r.kind_truth, {"support": 0, "correct": 0, "predicted": {}})
            k["support"] += 1
            k["correct"] += r.kind_predicted == r.kind_truth
            got = str(r.kind_predicted)
            k["predicted"][got] = k["predicted"].get(got, 0) + 1
        for k in out.values():
            k["accuracy"] = round(k["correct"] / k["support"], 4) if k["support"] else 0.0
        return dict(sorted(out.items()))

    @property
    def n_faulty(self) -> int:
        return sum(r.truth != "healthy" for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_runs": len(self.runs),
            "n_faulty": self.n_faulty,
            "macro_f1": round(self.macro_f1, 4),
            "onset_hit_rate": round(self.onset_hit_rate, 4),
            "onset_median_abs_error": self.onset_median_abs_error,
            "per_class": self.per_class,
            **({"per_kind": self.per_kind} if self.per_kind else {}),
            "runs": [
                {
                    "run": r.run,
                    "truth": r.truth,
                    "predicted": r.predicted,
                    "onset_truth": r.onset_truth,
                    "onset_predicted": r.onset_predicted,
                    "onset_error": r.onset_error,
                    "tolerance_steps": r.tolerance_steps,
                    "onset_hit": r.onset_hit,
                }
                for r in self.runs
            ],
        }


def score(
    corpus: str | Path,
    *,
    config: DiagnoseConfig | str | Path | None = None,
    executor: Executor | None = None,
) -> BenchScore:
    """Diagnose every run listed in ``corpus/labels.json`` and score the labels and onsets
    (each run a work item on ``executor``: in this process by default)."""
    from proxydiag.fleet.executor import Serial

    labels = load_labels(corpus)
    items = [
        (run_id, str(labels.run_path(run_id)), entry)
        for run_id, entry in sorted(labels.runs.items())
    ]
    scores = []
    for outcome in (executor or Serial()).map(partial(score_run, _config(config)), items):
        if outcome.ok:
            scores.append(outcome.value)
        else:  # the worker died or met a bug: a miss, named, not the end of the evaluation
            scores.append(_unreadable(*outcome.item, reason=outcome.reason))
    return summarise(scores)


def score_run(cfg: DiagnoseConfig, item: tuple[str, str, dict[str, Any]]) -> RunScore:
    """Read and diagnose one corpus run (``(run id, path, labels entry)``) and score it."""
    from proxydiag.diagnose.api import diagnose
    from proxydiag.ingest import read_run

    run_id, path, entry = item
    interval = int(entry.get("log_interval") or 1)
    try:
        run = read_run(path)
    except ProxydiagError as exc:
        # one unreadable run is a miss, not the end of the evaluation
        return _unreadable(run_id, path, entry, reason=str(exc))
    d = diagnose(run, config=cfg)
    span = (d.last_step or 0) - (d.first_step or 0) + interval
    return RunScore(
        run_id,
        str(entry["label"]),
        d.label,
        _int(entry.get("onset_step")),
        d.onset_step,
        tolerance(span_steps=span, log_interval=interval),
        interval,
        kind_truth=_kind_truth(entry),
        kind_predicted=(d.precision_kind or {}).get("kind"),
    )


def _kind_truth(entry: dict[str, Any]) -> str | None:
    """The kind of precision fault a corpus run is (its ``precision_kind``, else the one its
    synth variant stands for; None for other runs)."""
    from proxydiag.synth.scenario import PRECISION_KIND

    if entry.get("label") != "precision_fault":
        return None
    given = entry.get("precision_kind")
    return str(given) if given else PRECISION_KIND.get(str(entry.get("variant") or ""))


def _unreadable(run_id: str, path: str, entry: dict[str, Any], *, reason: str) -> RunScore:
    warnings.warn(IngestWarning(f"{run_id}: not scored as read ({reason})"), stacklevel=2)
    interval = int(entry.get("log_interval") or 1)
    return RunScore(
        run_id,
        str(entry["label"]),
        UNREADABLE,
        _int(entry.get("onset_step")),
        None,
        float(interval),
        interval,
    )


def tolerance(*, span_steps: float, log_interval: int) -> float:
    """Onset tolerance: max(5 steps, the log interval, 2% of the run).

    >>> tolerance(span_steps=1000, log_interval=1), tolerance(span_steps=300, log_interval=10)
    (20.0, 10.0)
    """
    return float(max(5.0, float(log_interval), 0.02 * span_steps))


def summarise(scores: list[RunScore]) -> BenchScore:
    """Per-class precision/recall/F1, macro-F1 and onset statistics of scored runs.

    >>> s = summarise([RunScore("a", "healthy", "healthy", None, None, 5, 1),
    ...                RunScore("b", "loss_divergence", "loss_divergence", 100, 103, 5, 1)])
    >>> s.macro_f1, s.onset_hit_rate
    (1.0, 1.0)
    """
    classes = [c for c in LABELS if any(c in (s.truth, s.predicted) for s in scores)]
    per_class: dict[str, dict[str, float]] = {}
    for c in classes:
        tp = sum(s.truth == c and s.predicted == c for s in scores)
        fp = sum(s.truth != c and s.predicted == c for s in scores)
        fn = sum(s.truth == c and s.predicted != c for s in scores)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        per_class[c] = {
            "precision": round(prec, 4),
            "recall": round(rec, 4),
            "f1": round(f1, 4),
            "support": tp + fn,
        }
    macro = float(np.mean([v["f1"] for v in per_class.values()])) if per_class else 0.0
    faulty = [s for s in scores if s.truth != "healthy"]
    hit = sum(s.onset_hit for s in faulty) / len(faulty) if faulty else 1.0
    errors = [abs(e) for s in faulty if (e := s.onset_error) is not None]
    med = float(np.median(errors)) if errors else None
    return BenchScore(per_class, macro, float(hit), med, tuple(scores))


def render(result: BenchScore, *, markdown: bool = False) -> str:
    """A table of per-class scores plus the headline numbers and the misses."""
    lines = [
        f"{len(result.runs)} runs ({result.n_faulty} faulty): macro-F1 {result.macro_f1:.3f}, "
        f"onset within tolerance {result.onset_hit_rate:.1%} of faulty runs, median |onset "
        f"error| {result.onset_median_abs_error} steps",
        "",
        "| class | precision | recall | F1 | support |",
        "|---|---:|---:|---:|---:|",
    ]
    for c, v in result.per_class.items():
        lines.append(
            f"| {c} | {v['precision']:.3f} | {v['recall']:.3f} | {v['f1']:.3f} "
            f"| {v['support']:.0f} |"
        )
    if result.per_kind:
        lines += [
            "",
            "| kind of precision fault | accuracy | support | predicted |",
            "|---|---:|---:|---|",
        ]
        for kind, k in result.per_kind.items():
            got = ", ".join(f"{p} {n}" for p, n in sorted(k["predicted"].items()))
            lines.append(f"| {kind} | {k['accuracy']:.3f} | {k['support']:.0f} | {got} |")
    misses = [
        r
        for r in result.runs
        if r.truth != r.predicted or (r.truth != "healthy" and not r.onset_hit)
    ]
    if misses:
        lines += ["", "misses:" if not markdown else "**misses**", ""]
        lines += [
            f"- {r.run}: truth {r.truth}@{r.onset_truth}, "
            f"predicted {r.predicted}@{r.onset_predicted}"
            f" (tolerance {r.tolerance_steps:g})"
            for r in misses
        ]
    return "\n".join(lines)


@dataclass(frozen=True)
class Labels:
    """A corpus's ``labels.json`` (schema: docs/architecture.md#labelled-corpora-labelsjson); run
    paths are relative to ``path.parent``."""

    path: Path
    runs: dict[str, dict[str, Any]]
    pairs: dict[str, dict[str, Any]]

    def run_path(self, run_id: str) -> Path:
        return self.path.parent / str(self.runs[run_id]["path"])


def load_labels(corpus: str | Path) -> Labels:
    """Read ``corpus/labels.json`` (or ``corpus`` itself when it is the file) for ``bench``."""
    path = Path(corpus)
    path = path / "labels.json" if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(
            f"{path}: no labels.json; pass a corpus folder written by "
            "`proxydiag synth` or `proxydiag lab`"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read labels ({exc})") from exc
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, dict):
        raise ConfigError(f"{path}: labels.json has no 'runs' object")
    pairs = data.get("pairs", {})
    if not isinstance(pairs, dict):
        raise ConfigError(f"{path}: 'pairs' in labels.json is not an object")
    for name, entry in runs.items():
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("label"), str)
        ):
            raise ConfigError(
                f"{path}: run {name!r} needs an object with a 'path' and a 'label' string"
            )
    for name, pair in pairs.items():
        named = [*pair.get("full", []), pair.get("proxy")] if isinstance(pair, dict) else [None]
        unknown = [r for r in named if not isinstance(r, str) or r not in runs]
        if not isinstance(pair, dict) or not isinstance(pair.get("full"), list) or unknown:
            raise ConfigError(
                f"{path}: pair {name!r} needs 'full' (a list) and 'proxy' naming "
                f"runs of 'runs'{f' (not {unknown[0]!r})' if unknown else ''}"
            )
    return Labels(path, runs, pairs)


def _config(config: DiagnoseConfig | str | Path | None) -> DiagnoseConfig:
    if isinstance(config, DiagnoseConfig):
        return config
    return load_config(config) if config is not None else DiagnoseConfig()


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
