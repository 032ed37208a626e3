"""Corpus targets of ``bench compare`` on a small generator corpus (skips until proxydiag.synth
exists): AUC of fidelity ≥ 0.95, verdict accuracy ≥ 0.9, full-seed pairs faithful ≥ 95%."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxydiag.evaluate.compare import BenchScore, evaluate, score

synth = pytest.importorskip(
    "proxydiag.synth", reason="proxydiag.synth (the generator) is not written yet"
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not hasattr(synth, "write_corpus"):
        pytest.skip("proxydiag.synth.write_corpus is not available yet")
    out = tmp_path_factory.mktemp("corpus")
    synth.write_corpus(out, n_groups=4, seed=11, steps=300)
    return out


@pytest.fixture(scope="module")
def with_truth(corpus: Path) -> BenchScore:
    return score(evaluate(corpus, truth=True))


def test_corpus_targets_with_true_diagnoses(with_truth: BenchScore) -> None:
    """The comparison alone: the pairs' faults are given by the corpus's ground truth."""
    s = with_truth
    assert s.n_pairs == 24 and s.n_seed_pairs == 12
    assert s.auc >= 0.95, s.per_why
    assert s.accuracy >= 0.9, [p for p in s.pairs if not p.correct]
    assert s.seed_faithful >= 0.95


@pytest.mark.slow
def test_corpus_targets_end_to_end(corpus: Path) -> None:
    """With ``diagnose`` in the loop (a misdiagnosed seed counts against compare)."""
    s = score(evaluate(corpus))
    assert s.auc >= 0.95, s.per_why
    assert s.accuracy >= 0.9, [(p.pair, p.verdict, p.reasons[:1]) for p in s.pairs if not p.correct]
    assert s.seed_faithful >= 0.95
