"""What fleet commands print of their work items: one line per failed item.

Where the work runs is the option group :class:`proxydiag.cli._options.Fleet`.
"""

from __future__ import annotations

from collections.abc import Iterable

from proxydiag.cli._app import err


def report_failures(failures: Iterable[tuple[str, str]]) -> int:
    """One ``error: SOURCE: REASON`` line on stderr per failed item; returns how many."""
    from proxydiag.fleet.executor import failure_line

    count = 0
    for source, reason in failures:
        err.print(f"error: {failure_line(source, reason)}", markup=False)
        count += 1
    return count
