"""The pipeline's room: one set of settings, and one analysis that diagnoses and compares with
them.

Every command that analyses (``diagnose``, ``compare``, ``report``, ``dashboard``, ``watch``,
the fleet commands), the report, the fleet tasks and the demo take a :class:`Settings` --
what ``--config FILE`` says, every section of it -- and do their work through an
:class:`Analysis`, so a user who tuned ``[scaler]`` or ``[mismatch]`` gets the same labels
from each of them. An analysis diagnoses each run once (a comparison reuses the diagnoses it
already made) and compares with the same detector settings it diagnosed with.

>>> Settings.load(None).digest == Settings().digest
True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.config import load_config as load_diagnose
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.config import load_config as load_compare

if TYPE_CHECKING:
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison
    from proxydiag.run import Run

__all__ = ["Analysis", "Settings"]


@dataclass(frozen=True)
class Settings:
    """Every section of a ``--config`` TOML file: the detectors' (``[scaler]``,
    ``[mismatch]``, …) and the comparison's (``[compare]``)."""

    diagnose: DiagnoseConfig = field(default_factory=DiagnoseConfig)
    compare: FidelityConfig = field(default_factory=FidelityConfig)
    #: the file they were read from (None: the defaults; not part of what they say)
    path: str | None = field(default=None, compare=False, repr=False)

    @classmethod
    def load(cls, path: str | Path | None) -> Settings:
        """The settings of a TOML file (the defaults for None). Raises
        :class:`~proxydiag.errors.ConfigError` naming the file and key for an unknown section or
        key, a value of the wrong type or out of range."""
        if path is None:
            return cls()
        return cls(load_diagnose(path), load_compare(path), str(path))

    @property
    def digest(self) -> str:
        """A short hash of every value (where results made with these settings are kept)."""
        blob = json.dumps(
            {"diagnose": asdict(self.diagnose), "compare": asdict(self.compare)},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Analysis:
    """Diagnoses and comparisons made with one :class:`Settings`; each run is diagnosed once."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        # keyed by the run object (kept alive here, so its id is not reused)
        self._done: dict[int, tuple[Run, Diagnosis]] = {}

    def diagnose(self, run: Run, *, source: str | None = None) -> Diagnosis:
        """The diagnosis of ``run`` with these settings (made once)."""
        from proxydiag.diagnose.api import diagnose

        found = self._done.get(id(run))
        if found is None:
            found = (run, diagnose(run, config=self.settings.diagnose, source=source))
            self._done[id(run)] = found
        return found[1]

    def known(self, run: Run, diagnosis: Diagnosis) -> None:
        """Take ``diagnosis`` as ``run``'s (made elsewhere with these settings)."""
        self._done[id(run)] = (run, diagnosis)

    def compare(
        self, full: Run | Sequence[Run], proxy: Run, *, align: str = "step", seed: int = 0
    ) -> Comparison:
        """How faithfully ``proxy`` reproduced ``full`` (a run or its seeds, reference first),
        the faults matched on this analysis's diagnoses."""
        from proxydiag.fidelity.api import compare
        from proxydiag.run import Run as _Run

        fulls = [full] if isinstance(full, _Run) else list(full)
        return compare(
            fulls,
            proxy,
            align=align,
            config=self.settings.compare,
            full_diagnoses=[self.diagnose(r) for r in fulls],
            proxy_diagnosis=self.diagnose(proxy),
            seed=seed,
        )
