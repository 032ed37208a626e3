"""``--ray [--ray-address ADDR]``: fleet work items as Ray tasks.

Without an address a local Ray is started (all of this machine's cores); ``auto`` joins the
cluster this node belongs to (``ray start`` ran here, as it has on every node of a veRL,
OpenRLHF or NeMo-RL job), and ``ray://host:10001`` a remote one through Ray Client. The nodes
need proxydiag installed (``pip install 'proxydiag[ray]'``) and the sources at the same paths
(shared storage) or as MLflow URIs they can reach.

Ray's worker output never reaches the driver's stdout (``log_to_driver=False``): what a command
prints is what ``--workers 1`` prints. A task whose worker process dies is retried by Ray on
another worker (:data:`MAX_RETRIES`); the driver writes each item's result once, when it
arrives, so a retry never duplicates a run in the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from proxydiag.errors import MissingExtraError, ProxydiagError
from proxydiag.fleet._local_pool import attempt_quietly, replay_warnings
from proxydiag.fleet.executor import Outcome, in_order, one_line

#: Ray's default for tasks, said explicitly: a dead worker's task runs again up to 3 times
MAX_RETRIES = 3
#: tasks outstanding per CPU of the cluster (keeps every CPU fed while the driver writes)
WINDOW_PER_CPU = 4


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("ray", "ray") from exc
    return ray


def connect(address: str | None) -> Any:
    """The ``ray`` module, initialised: joined to ``address``, or a local Ray started."""
    ray = _ray()
    if not ray.is_initialized():
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
                configure_logging=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"at {address}" if address else "locally"
            raise ProxydiagError(
                f"--ray: cannot start or reach Ray {where} ({one_line(str(exc))})"
            ) from exc
    return ray


class RayPool:
    """Items as Ray tasks, at most ``WINDOW_PER_CPU`` × the cluster's CPUs outstanding."""

    name = "ray"

    def __init__(self, *, address: str | None = None) -> None:
        self.address = address

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Outcome]:
        ray = connect(self.address)
        task = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(attempt_quietly)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        running: dict[Any, tuple[int, Any]] = {}

        def submit(index: int, item: Any) -> None:
            running[task.remote(fn, item)] = (index, item)

        def collect() -> tuple[int, Outcome]:
            [ref], _ = ray.wait(list(running), num_returns=1)
            index, item = running.pop(ref)
            try:
                return index, ray.get(ref)
            except ray.exceptions.RayError as exc:  # the retries were used up
                return index, Outcome(item, False, reason=_ray_failure(exc))

        try:
            for outcome in in_order(submit, collect, items, window=max(1, cpus) * WINDOW_PER_CPU):
                replay_warnings(outcome)
                yield outcome
        finally:
            for ref in running:
                ray.cancel(ref, force=True)


def _ray_failure(exc: BaseException) -> str:
    """One line for a task Ray gave up on (its first line names the cause)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return one_line(
        f"Ray gave up on this item after {MAX_RETRIES} retries: "
        f"{type(exc).__name__}{': ' + first if first else ''}"
    )
