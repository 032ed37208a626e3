"""The comparison's text and Markdown iterate the registered fidelity tests: a new scored test
shows up without touching the report."""

from __future__ import annotations

from dataclasses import replace

import pytest

from proxydiag.fidelity import api
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.report.comparison import scored_tests


class _Curvature:
    NAME = "curvature"

    @staticmethod
    def score(full_runs, proxy, grid, *, ctx):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_scored_tests_are_the_weighted_registered_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    config = FidelityConfig()
    assert scored_tests(config) == ["trend", "shape", "volatility", "increments"]
    monkeypatch.setattr(api, "TESTS", api.Registry("fidelity test", dict(api.TESTS.items())))
    api.TESTS.register("curvature", _Curvature())
    weighted = replace(config, test_weights={**config.test_weights, "curvature": 0.1})
    assert scored_tests(weighted)[-1] == "curvature"
    assert "curvature" not in scored_tests(config)  # registered, weight 0: reported only
