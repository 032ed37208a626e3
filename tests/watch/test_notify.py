"""``--notify URL``: alerts POSTed to a real HTTP server on 127.0.0.1, tiered, rate-limited,
retried, and never blocking the watch when the receiver is down or slow."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from proxydiag.errors import ConfigError, IngestWarning
from proxydiag.watch.alerts import Alert, Rollback
from proxydiag.watch.notify import Notifier

SCHEMA = json.loads(
    (
        Path(__file__).resolve().parents[2] / "proxydiag" / "schemas" / "watch_alert.schema.json"
    ).read_text()
)


class _Receiver:
    """A webhook receiver: records each POSTed body; answers ``status`` after ``delay_s``."""

    def __init__(self, *, status: int = 200, delay_s: float = 0.0, fail_first: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver.attempts += 1
                size = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(size))
                time.sleep(delay_s)
                code = 503 if receiver.attempts <= fail_first else status
                if code == 200:
                    receiver.bodies.append(body)
                self.send_response(code)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    r = _Receiver()
    yield r
    r.close()


def _alert(label: str = "loss_divergence", confidence: float = 0.9, run: str = "r1") -> Alert:
    return Alert(
        run,
        "grpo-7b",
        label,
        210,
        240,
        confidence,
        summary=f"{label} from step 210",
        hints=("Check the learning rate schedule around the onset.", "Then the data."),
        rollback=Rollback(100, "ckpt/checkpoint-100", 101, 210),
    )


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def test_an_alert_is_delivered_as_its_json_with_a_chat_line(receiver: _Receiver) -> None:
    n = Notifier((receiver.url,))
    assert n.submit(_alert())
    n.close()
    assert n.delivered == 1 and n.failed == 0
    [body] = receiver.bodies
    jsonschema.validate(body, SCHEMA)
    assert body["class"] == "loss_divergence" and body["tier"] == "critical"
    assert body["text"].startswith("[critical] grpo-7b: loss_divergence from step 210")
    assert "Go back to step 100" in body["text"] and "learning rate" in body["text"]
    assert "\n" not in body["text"] and body["recommendation"].startswith("Check the")


def test_tiers_cooldown_and_cap(receiver: _Receiver) -> None:
    now = [0.0]
    n = Notifier(
        (receiver.url,), min_tier="critical", cooldown_s=60, max_per_run=2, clock=lambda: now[0]
    )
    assert not n.submit(_alert(confidence=0.5))  # a warning, below the tier asked for
    assert n.submit(_alert())
    assert not n.submit(_alert())  # same run and class inside the cooldown
    assert n.submit(_alert(label="gradient_overflow"))  # another class
    now[0] = 120.0
    assert not n.submit(_alert())  # the cooldown passed, but the run's cap (2) is reached
    assert n.submit(_alert(run="r2"))  # another run has its own cap
    n.close()
    assert n.delivered == 3 and len(receiver.bodies) == 3


def test_a_receiver_that_fails_twice_gets_it_on_the_third_try() -> None:
    r = _Receiver(fail_first=2)
    try:
        n = Notifier((r.url,), backoff_s=0.05)
        n.submit(_alert())
        n.close()
        assert r.attempts == 3 and n.delivered == 1
    finally:
        r.close()


def test_a_receiver_that_is_down_never_blocks_and_is_one_warning() -> None:
    n = Notifier((_closed_port(),), backoff_s=0.05, retries=2)
    start = time.monotonic()
    for run in range(5):
        n.submit(_alert(run=f"r{run}"))
    assert time.monotonic() - start < 0.5  # submitting returns at once
    with pytest.warns(IngestWarning, match="not delivered after 3 tries"):
        n.close()
    assert n.failed == 5 and n.delivered == 0


def test_a_slow_receiver_never_blocks_the_watch() -> None:
    r = _Receiver(delay_s=2.0)
    try:
        n = Notifier((r.url,), timeout_s=5.0)
        start = time.monotonic()
        n.submit(_alert())
        n.submit(_alert(run="r2"))
        assert time.monotonic() - start < 0.5
        n.close(timeout_s=15.0)
        assert n.delivered == 2
    finally:
        r.close()


@pytest.mark.parametrize(
    "kwargs",
    [{"urls": ("ftp://x",)}, {"urls": ("http://127.0.0.1:9",), "min_tier": "loud"}],
)
def test_bad_settings_are_one_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Notifier(**kwargs)
