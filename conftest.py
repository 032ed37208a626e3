"""Root conftest: doctests of optional parts are collected only when their extra is installed."""

from __future__ import annotations

import importlib.util

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob.append("proxydiag/lab/*")
