"""The demo (re)creates its store: a store (even one `watch` used before any ingest, holding
only its state) is replaced; a folder that is not a store is never removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxydiag.cli.demo_pipeline import fresh_store
from proxydiag.errors import StoreError


def test_a_store_holding_only_watch_state_is_replaced(tmp_path: Path) -> None:
    store = tmp_path / "proxydiag-store"
    (store / "watch").mkdir(parents=True)
    (store / "watch" / "state.json").write_text("{}", encoding="utf-8")
    assert fresh_store(store).path == store
    assert not (store / "watch").exists()


def test_a_folder_that_is_not_a_store_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(StoreError, match="not a proxydiag store"):
        fresh_store(folder)
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "keep me"
