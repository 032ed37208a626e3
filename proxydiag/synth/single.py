"""Write one scenario as one run (``proxydiag synth --scenario NAME``)."""

from __future__ import annotations

import json
from pathlib import Path

from proxydiag.errors import ConfigError
from proxydiag.synth.naming import FORMATS, NAMINGS, can_show
from proxydiag.synth.plan import PlannedRun
from proxydiag.synth.scenario import Scenario


def write_single(
    out_dir: str | Path,
    scenario: Scenario,
    *,
    seed: int,
    fmt: str,
    naming: str,
    log_interval: int = 1,
) -> Path:
    """Write ``scenario`` into ``out_dir/<name>/`` plus a one-run ``labels.json``; return it.

    Raises :class:`~proxydiag.errors.ConfigError` when the format/naming cannot show the
    scenario's fault (e.g. a precision fault in a Megatron console log).
    """
    from proxydiag.synth.corpus import write_planned

    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if naming not in NAMINGS:
        raise ConfigError(f"unknown naming {naming!r}; use one of {', '.join(NAMINGS)}")
    if log_interval < 1:
        raise ConfigError(f"log interval must be >= 1, got {log_interval}")
    variant = scenario.fault.variant if scenario.fault else ""
    if not can_show(
        naming, fmt, variant=variant, precision=scenario.precision, routing=scenario.routing
    ):
        raise ConfigError(
            f"format {fmt!r} with naming {naming!r} cannot show {variant or 'this run'} in "
            f"{scenario.precision} (formats of {naming}: {', '.join(NAMINGS[naming].formats)}); "
            "pick another --format/--naming"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entry = write_planned(out, PlannedRun(scenario, seed, fmt, naming, log_interval))
    labels = out / "labels.json"
    labels.write_text(json.dumps({"runs": {scenario.name: entry}, "pairs": {}}, indent=1) + "\n")
    return labels
