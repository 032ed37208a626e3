"""Live guard: streaming diagnosis of runs that are still training (``proxydiag watch``)."""

from __future__ import annotations

from proxydiag.watch.alerts import Alert, Rollback
from proxydiag.watch.checkpoints import Checkpoints
from proxydiag.watch.watcher import Watcher, WatchLimits

__all__ = ["Alert", "Checkpoints", "Rollback", "WatchLimits", "Watcher"]
