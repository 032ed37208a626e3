"""Alerts that reach people: webhooks (``proxydiag watch --notify URL``).

Each alert is POSTed as its JSON (``watch_alert.schema.json``) with a one-line ``text`` field,
which chat webhooks (Slack, Mattermost, Teams' incoming webhooks, Discord's ``content``)
display as the message. Delivery never blocks the watch: alerts go into a queue that one
background thread sends, each with a timeout and retries with exponential back-off; a
receiver that is down or slow costs a warning, never a tick.

What is sent is bounded:

- **tiers**: an alert is ``critical`` when the failure is confirmed (confidence at least
  :data:`~proxydiag.watch.alerts.CRITICAL_CONFIDENCE`), else ``warning``
  (:attr:`~proxydiag.watch.alerts.Alert.tier`); ``min_tier`` drops the lower tier;
- **cooldown**: one alert per run and class every ``cooldown_s`` seconds (a revision of the
  same class inside it is not sent);
- **cap**: at most ``max_per_run`` alerts per run.

>>> from proxydiag.watch.alerts import Alert
>>> a = Alert("r", "grpo-7b", "loss_divergence", 210, 240, 0.55, hints=("Check the lr.",))
>>> a.tier, message(a)[:48], message(a)[-13:]
('warning', '[warning] grpo-7b: loss_divergence from step 210', 'Check the lr.')
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from proxydiag.errors import ConfigError, IngestWarning
from proxydiag.watch.alerts import Alert

TIERS = ("warning", "critical")


def message(alert: Alert) -> str:
    """The one line a chat shows for ``alert``."""
    back = alert.rollback
    where = (
        f" Go back to step {back.checkpoint_step}, skip {back.skip_from_step}-{back.skip_to_step}."
        if back
        else ""
    )
    advice = alert.recommendation
    return (
        f"[{alert.tier}] {alert.name}: {alert.label} from step {alert.onset_step} (raised at "
        f"step {alert.raised_at_step}, confidence {alert.confidence:.2f}).{where}"
        + (f" {advice}" if advice else "")
    )


def payload(alert: Alert) -> dict[str, Any]:
    """The JSON body: the alert and the chat line (``text``; ``content`` for Discord)."""
    line = message(alert)
    return {**alert.to_dict(), "text": line, "content": line[:2000]}


@dataclass
class Notifier:
    """Send alerts to webhooks in the background (see the module docstring)."""

    urls: tuple[str, ...]
    min_tier: str = "warning"
    cooldown_s: float = 600.0
    max_per_run: int = 20
    timeout_s: float = 5.0
    retries: int = 3
    backoff_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    #: deliveries that reached a receiver (2xx), and those given up on
    delivered: int = 0
    failed: int = 0
    _last: dict[tuple[str, str], float] = field(default_factory=dict)
    _sent: dict[str, int] = field(default_factory=dict)
    _queue: queue.Queue[tuple[str, bytes] | None] = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"--notify {url!r}: give an http:// or https:// URL")
        if self.min_tier not in TIERS:
            raise ConfigError(f"--notify-min {self.min_tier!r}: use {' or '.join(TIERS)}")
        if self.cooldown_s < 0 or self.max_per_run < 1:
            raise ConfigError("--notify-cooldown must be >= 0 s and --notify-max at least 1")

    def submit(self, alert: Alert) -> bool:
        """Queue ``alert`` for every URL; False when its tier, the cooldown or the cap
        holds it back. Returns at once."""
        if not self.urls or TIERS.index(alert.tier) < TIERS.index(self.min_tier):
            return False
        now, key = self.clock(), (alert.run, alert.label)
        last = self._last.get(key)
        if last is not None and now - last < self.cooldown_s:
            return False
        if self._sent.get(alert.run, 0) >= self.max_per_run:
            return False
        self._last[key] = now
        self._sent[alert.run] = self._sent.get(alert.run, 0) + 1
        body = json.dumps(payload(alert)).encode()
        self._start()
        for url in self.urls:
            self._queue.put((url, body))
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Wait up to ``timeout_s`` for what is queued to be sent, then stop the sender."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            warnings.warn(
                IngestWarning(f"--notify: {self._queue.qsize()} alert(s) not delivered in time"),
                stacklevel=2,
            )
        self._thread = None

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="proxydiag-notify", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            url, body = item
            ok = self._send(url, body)
            with self._lock:
                if ok:
                    self.delivered += 1
                else:
                    self.failed += 1

    def _send(self, url: str, body: bytes) -> bool:
        error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(
                url, data=body, method="POST", headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    if 200 <= response.status < 300:
                        return True
                    error = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code}"
                if 400 <= exc.code < 500 and exc.code != 429:
                    break  # the receiver refuses this body: trying again will not help
            except (OSError, ValueError) as exc:  # refused, unreachable, timed out
                error = str(getattr(exc, "reason", exc))
        warnings.warn(
            IngestWarning(f"--notify {url}: not delivered after {attempt + 1} tries ({error})"),
            stacklevel=2,
        )
        return False


def notifier(
    urls: Iterable[str],
    *,
    min_tier: str = "warning",
    cooldown_s: float = 600.0,
    max_per_run: int = 20,
) -> Notifier | None:
    """A :class:`Notifier` for ``urls``, or None without any."""
    found = tuple(u for u in urls if u)
    if not found:
        return None
    return Notifier(found, min_tier=min_tier, cooldown_s=cooldown_s, max_per_run=max_per_run)
