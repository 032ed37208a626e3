"""Live guard: streaming diagnosis of runs that are still training (``proxydiag watch``)."""

from __future__ import annotations

from proxydiag.watch.alerts import Alert, Rollback
from proxydiag.watch.checkpoints import Checkpoints
from proxydiag.watch.rules import WatchLimits
from proxydiag.watch.watcher import Watcher

__all__ = ["Alert", "Checkpoints", "Rollback", "WatchLimits", "Watcher"]
