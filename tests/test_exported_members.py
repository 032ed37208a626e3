"""The public API is exactly ``__all__``: real, typed objects (httpx's habit)."""

from __future__ import annotations

import inspect

import proxydiag

PUBLIC = {
    "AliasTable",
    "Comparison",
    "Diagnosis",
    "Event",
    "ProxyCost",
    "ProxydiagError",
    "Recommendation",
    "Run",
    "RunStore",
    "__version__",
    "compare",
    "diagnose",
    "read_run",
    "read_runs",
    "recommend",
    "report",
}


def test_all_is_pinned() -> None:
    assert set(proxydiag.__all__) == PUBLIC
    assert len(proxydiag.__all__) == len(PUBLIC)


def test_every_exported_member_is_defined_where_it_lives() -> None:
    for name in proxydiag.__all__:
        member = getattr(proxydiag, name)
        if name == "__version__":
            assert isinstance(member, str)
            continue
        assert member.__module__.startswith("proxydiag."), name


def test_the_functions_are_the_real_ones_with_their_signatures() -> None:
    from proxydiag.diagnose.api import diagnose
    from proxydiag.fidelity.api import compare
    from proxydiag.report.api import report

    assert proxydiag.diagnose is diagnose and proxydiag.compare is compare
    assert proxydiag.report is report
    for fn in (proxydiag.diagnose, proxydiag.compare, proxydiag.report):
        params = inspect.signature(fn).parameters.values()
        assert all(p.kind is not p.VAR_KEYWORD for p in params), fn.__name__
        assert all(p.annotation is not inspect.Parameter.empty for p in params), fn.__name__
