"""Fleet analysis: many runs read, diagnosed and compared by workers, written by one driver.

- :mod:`~proxydiag.fleet.executor`: where work items run (in-process, ``--workers N`` local
  processes, ``--ray``), outcomes in the items' order, failures per item;
- :mod:`~proxydiag.fleet.tasks`: the work items as a worker runs them (read a source, diagnose
  a run, compare a proxy), returning compact results;
- :mod:`~proxydiag.fleet.ingest` and :mod:`~proxydiag.fleet.analyse`: the drivers, the store's
  only writer, skipping what is unchanged since it was last stored;
- :mod:`~proxydiag.fleet.digest` and :mod:`~proxydiag.fleet.index`: the digests that decide
  what is unchanged, and the catalog queries a driver plans with.
"""
