"""Fleet analysis: many runs read, diagnosed and compared by workers, written by one driver.

- :mod:`~proxydiag.fleet.executor`: how work items run and what they give (outcomes in the
  items' order, failures per item), in this process; ``local_pool`` (``--workers N``) and
  ``ray_pool`` (``--ray``) run them elsewhere, and :func:`make_executor` picks one;
- :mod:`~proxydiag.fleet.tasks`: the work items as a worker runs them (read a source, diagnose
  a run, compare a proxy), returning compact results;
- :mod:`~proxydiag.fleet.ingest` and :mod:`~proxydiag.fleet.analyse`: the drivers, the store's
  only writer, skipping what is unchanged since it was last stored;
- :mod:`~proxydiag.fleet.digest` and :mod:`~proxydiag.fleet.index`: the digests that decide
  what is unchanged, and the catalog queries a driver plans with.
"""

from __future__ import annotations

from proxydiag.errors import ConfigError
from proxydiag.fleet.executor import Executor, Serial


def make_executor(
    *,
    workers: int = 1,
    ray: bool = False,
    ray_address: str | None = None,
) -> Executor:
    """The executor the CLI flags ask for: ``--ray [--ray-address ADDR]`` or ``--workers N``."""
    if workers < 1:
        raise ConfigError(f"--workers {workers}: give 1 or more worker processes")
    if ray_address is not None and not ray:
        raise ConfigError("--ray-address needs --ray")
    if ray:
        if workers != 1:
            raise ConfigError("--workers and --ray exclude each other: Ray sizes its own pool")
        from proxydiag.fleet._ray_pool import RayPool

        return RayPool(address=ray_address)
    if workers == 1:
        return Serial()
    from proxydiag.fleet._local_pool import LocalPool

    return LocalPool(workers=workers)
