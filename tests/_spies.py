"""Spies: record what a function is called with and let every call through."""

from __future__ import annotations

from typing import Any

import pytest

#: a tracking URI nothing listens on (port 9, discard)
MLFLOW_DOWN = "http://127.0.0.1:9"


def recorded(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[tuple[Any, ...]]:
    """The positional arguments of every call of ``owner.name`` from now on (``self`` first for
    a method patched on its class); monkeypatch restores the original afterwards."""
    real = getattr(owner, name)
    calls: list[tuple[Any, ...]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


def mlflow_down(monkeypatch: pytest.MonkeyPatch) -> str:
    """Point MLflow at :data:`MLFLOW_DOWN` without retries (a CLI's ``--tracking-uri`` exports
    ``MLFLOW_TRACKING_URI``: set here, monkeypatch restores it afterwards); returns the URI."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", MLFLOW_DOWN)
    return MLFLOW_DOWN
