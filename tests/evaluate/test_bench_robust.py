"""A corpus with an unreadable run is still scored: that run is a miss, with a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxydiag.errors import IngestWarning
from proxydiag.evaluate.compare import evaluate
from proxydiag.evaluate.diagnose import UNREADABLE, score
from proxydiag.synth import write_corpus


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    labels = write_corpus(tmp_path_factory.mktemp("c") / "c", n_groups=1, seed=3, steps=200)
    data = json.loads(labels.read_text())
    broken = sorted(n for n, r in data["runs"].items() if r["role"] == "proxy")[0]
    data["runs"][broken]["path"] = "missing/dir"
    labels.write_text(json.dumps(data))
    return labels.parent, broken


def test_bench_diagnose_scores_an_unreadable_run_as_a_miss(damaged: tuple[Path, str]) -> None:
    corpus, broken = damaged
    with pytest.warns(IngestWarning, match="missing/dir"):
        result = score(corpus)
    row = next(r for r in result.runs if r.run == broken)
    assert row.predicted == UNREADABLE and not row.onset_hit
    assert len(result.runs) == 6


def test_bench_compare_skips_pairs_it_cannot_read_and_pairs_without_truth(
    damaged: tuple[Path, str],
) -> None:
    corpus, broken = damaged
    data = json.loads((corpus / "labels.json").read_text())
    readable = [n for n, p in data["pairs"].items() if broken not in (*p["full"], p["proxy"])]
    unknown = readable[0]
    data["pairs"][unknown]["faithful"] = None
    (corpus / "labels.json").write_text(json.dumps(data))
    with pytest.warns(IngestWarning, match="not scored"):
        results = evaluate(corpus, truth=True)
    assert {r.pair for r in results} == set(readable) - {unknown}


def test_bench_compare_names_a_pair_the_comparison_refuses(tmp_path: Path) -> None:
    """Found in an audit: a proxy whose step axis does not overlap the full run's (a samples
    axis: 'use --align progress') raised out of the whole corpus; that pair is now named and
    the others are scored."""
    from proxydiag.ingest import read_run

    labels = write_corpus(tmp_path / "c", n_groups=1, seed=4, steps=200)
    data = json.loads(labels.read_text())
    moved = sorted(n for n, r in data["runs"].items() if r["role"] == "proxy")[0]
    run = read_run(labels.parent / data["runs"][moved]["path"])
    far = run.frame.select((run.frame["step"] + 10**7).alias("step"), "key", "value")
    far.write_csv(tmp_path / "far.csv")
    data["runs"][moved]["path"] = str(tmp_path / "far.csv")
    labels.write_text(json.dumps(data))
    with pytest.warns(IngestWarning, match="not scored"):
        results = evaluate(labels.parent, truth=True)
    scored = {r.pair for r in results}
    assert scored and not any(p["proxy"] == moved for n, p in data["pairs"].items() if n in scored)
