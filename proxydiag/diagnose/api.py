"""``diagnose(run) -> Diagnosis``: run every detector, then the taxonomy.

A detector satisfies :class:`~proxydiag.diagnose.contract.Detector` (``detect(run, cfg) ->
list[Event]``); adding one is a new module plus one line in :data:`DETECTORS`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from proxydiag.diagnose import rollbacks, taxonomy
from proxydiag.diagnose.config import DiagnoseConfig, load_config
from proxydiag.diagnose.contract import Detector
from proxydiag.diagnose.result import Diagnosis, RootCause
from proxydiag.diagnose.taxonomy import classify
from proxydiag.diagnose.view import Reads, view
from proxydiag.events import Event
from proxydiag.registry import Registry
from proxydiag.run import Run

#: detector name -> module, run in this order (imported on first use)
DETECTORS: Registry[Detector] = Registry(
    "detector",
    {
        name: f"proxydiag.diagnose.detectors.{name}"
        for name in (
            "nonfinite",
            "scaler",
            "spikes",
            "divergence",
            "collapse",
            "short",
            "mismatch",
            "master_weights",
            "mismatch_shift",
            "router",
            "drift",
        )
    },
)


def metrics_read(cfg: DiagnoseConfig | None = None) -> Reads:
    """What the diagnosis reads with ``cfg`` (default settings when None): the union of the
    registered detectors' and the taxonomy's declarations (:mod:`~proxydiag.diagnose.contract`).

    >>> r = metrics_read()
    >>> "grad_norm" in r, "mismatch_kl" in r, "throughput_tokens" in r
    (True, True, False)
    """
    if cfg is None:
        return _default_reads()
    patterns = [*taxonomy.reads(cfg)]
    for detector in DETECTORS:
        patterns += detector.reads(cfg)
    return Reads.of(patterns)


@lru_cache(maxsize=1)
def _default_reads() -> Reads:
    return metrics_read(DiagnoseConfig())


def diagnose(
    run: Run,
    *,
    config: DiagnoseConfig | str | Path | None = None,
    source: str | None = None,
) -> Diagnosis:
    """Label ``run`` healthy / gradient_overflow / loss_divergence / precision_fault.

    Parameters
    ----------
    run
        Any run in the canonical frame; detectors use the metrics it has and the diagnosis
        lists in ``missing`` the metrics whose absence left a class undecidable.
    config
        A :class:`DiagnoseConfig`, or the path of a TOML file of overrides.
    source
        What to report as the source (default: the run's ``attrs["source"]``).

    Examples
    --------
    >>> import numpy as np
    >>> from proxydiag.frame import raw
    >>> from proxydiag.run.build import build_run
    >>> steps = np.arange(200)
    >>> grad = np.where(steps < 150, 1.0, np.inf)
    >>> loss = np.full(200, 2.0)
    >>> r = build_run(raw(np.r_[steps, steps], ["grad_norm"] * 200 + ["loss"] * 200,
    ...                   np.r_[grad, loss]), name="demo", source="demo", fmt="test")
    >>> d = diagnose(r)
    >>> d.label, d.onset_step
    ('gradient_overflow', 150)
    """
    cfg = (
        config
        if isinstance(config, DiagnoseConfig)
        else (load_config(config) if config is not None else DiagnoseConfig())
    )
    main = _diagnose_one(run, cfg, source)
    if not run.superseded:
        return main
    return rollbacks.combine(main, run, lambda sub: _diagnose_one(sub, cfg, source))


def _diagnose_one(run: Run, cfg: DiagnoseConfig, source: str | None) -> Diagnosis:
    """One timeline's diagnosis: every detector, then the taxonomy."""
    rv = view(run, metrics_read(cfg))
    events: list[Event] = [*_reader_events(run)]
    for detector in DETECTORS:
        events.extend(detector.detect(rv, cfg))
    verdict = classify(events, rv, cfg)
    root = verdict.root
    return Diagnosis(
        source=source if source is not None else str(run.attrs.get("source", run.name)),
        run=run.id,
        label=verdict.label,
        onset_step=verdict.onset_step,
        confidence=verdict.confidence,
        root_cause=RootCause(root.kind, root.metric, root.onset_step) if root else None,
        events=verdict.chain,
        hints=verdict.hints,
        missing=verdict.missing,
        metrics=dict(run.mapping),
        first_step=rv.first_step,
        last_step=rv.last_step,
        summary=verdict.summary,
        precision_kind=verdict.kind.to_dict() if verdict.kind else None,
    )


def _reader_events(run: Run) -> list[Event]:
    """Events the reader recorded (restarts, CRC errors) stay in the evidence as context."""
    return [e for e in run.events if isinstance(e, Event)]
