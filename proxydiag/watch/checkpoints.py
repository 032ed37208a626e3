"""Where to go back to: the run's checkpoints and the one to restart from after an onset.

Checkpoints are found as folders named by the frameworks that write them: Hugging Face
``checkpoint-N``, Megatron ``iter_N`` (``iter_0000500``), DeepSpeed ``global_stepN``, or given
as a list of steps (``--checkpoints 100,200,300``). The restart point is the last checkpoint at
or before ``onset - margin_steps``: PaLM restarted "from a checkpoint roughly 100 steps before
the spike started" and skipped "roughly 200–500 data batches" (Chowdhery et al. 2022, §5.1);
the batches from that checkpoint to the onset are the ones to skip.

>>> c = Checkpoints.from_steps([100, 200, 300, 400])
>>> r = c.rollback(380)
>>> r.checkpoint_step, r.skip_from_step, r.skip_to_step
(200, 201, 380)
>>> c.rollback(150) is None  # nothing 100 steps before the onset
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from proxydiag.errors import ConfigError
from proxydiag.watch.alerts import Rollback

#: folder names of checkpoints, by framework: HF Trainer, Megatron, DeepSpeed
PATTERNS = (
    re.compile(r"^checkpoint-(\d+)$"),
    re.compile(r"^iter_(\d+)$"),
    re.compile(r"^global_step(\d+)$"),
)
#: default margin before the onset (PaLM: "roughly 100 steps before the spike started")
MARGIN_STEPS = 100


@dataclass(frozen=True)
class Checkpoints:
    """Checkpoint steps (ascending) and, where known, their folders; with ``folder``, the
    checkpoints are whatever that folder holds when a rollback is asked for (a training run
    writes new ones as it goes, and the folder may not exist yet when the watch starts)."""

    steps: tuple[int, ...]
    paths: tuple[str | None, ...]
    margin_steps: int = MARGIN_STEPS
    folder: str | None = None

    @classmethod
    def from_steps(cls, steps: Iterable[int], *, margin_steps: int = MARGIN_STEPS) -> Checkpoints:
        found = sorted({int(s) for s in steps})
        return cls(tuple(found), (None,) * len(found), _margin(margin_steps))

    @classmethod
    def parse(cls, text: str, *, margin_steps: int = MARGIN_STEPS) -> Checkpoints:
        """Steps from ``"100,200,300"``, or else a folder of checkpoints (the
        ``--checkpoints`` option).

        >>> Checkpoints.parse("300, 100").steps
        (100, 300)
        >>> Checkpoints.parse("runs/ckpt").folder
        'runs/ckpt'
        """
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if parts and all(p.isdigit() for p in parts):
            return cls.from_steps((int(p) for p in parts), margin_steps=margin_steps)
        if not parts:
            raise ConfigError(f"--checkpoints {text!r}: give steps separated by commas or a folder")
        return cls.scan(text, margin_steps=margin_steps)

    @classmethod
    def scan(cls, folder: str | Path, *, margin_steps: int = MARGIN_STEPS) -> Checkpoints:
        """The checkpoint folders directly inside ``folder``, read again at every
        :meth:`rollback` (none while it does not exist)."""
        return cls((), (), _margin(margin_steps), str(folder)).current()

    def current(self) -> Checkpoints:
        """The checkpoints there are now (the folder read again)."""
        if self.folder is None:
            return self
        root = Path(self.folder)
        found: dict[int, str] = {}
        if root.is_dir():
            for child in root.iterdir():
                step = step_of(child.name)
                if step is not None and child.is_dir():
                    found[step] = str(child)
        steps = sorted(found)
        return Checkpoints(
            tuple(steps), tuple(found[s] for s in steps), self.margin_steps, self.folder
        )

    def rollback(self, onset_step: int, *, span_steps: int | None = None) -> Rollback | None:
        """The last checkpoint at or before ``onset_step`` minus the margin, or None.

        The margin is ``margin_steps``; when that leaves no checkpoint and ``span_steps`` (the
        steps the run has so far) is given, at most a tenth of it: 100 steps before an onset at
        step 80 leaves nothing to go back to, and a short run's fault is not that far from its
        cause.

        >>> c = Checkpoints.from_steps([20, 40, 60, 80])
        >>> c.rollback(85) is None, c.rollback(85, span_steps=90).checkpoint_step
        (True, 60)
        """
        now = self.current()
        margins = [self.margin_steps]
        if span_steps is not None and span_steps // 10 < self.margin_steps:
            margins.append(max(span_steps // 10, 0))
        for margin in margins:
            before = [i for i, step in enumerate(now.steps) if step <= onset_step - margin]
            if before:
                step = now.steps[before[-1]]
                return Rollback(step, now.paths[before[-1]], step + 1, onset_step)
        return None


def step_of(name: str) -> int | None:
    """The step in a checkpoint folder's name, or None.

    >>> step_of("checkpoint-500"), step_of("iter_0001000"), step_of("global_step20"), step_of("x")
    (500, 1000, 20, None)
    """
    for pattern in PATTERNS:
        match = pattern.match(name)
        if match:
            return int(match.group(1))
    return None


def _margin(value: int) -> int:
    if int(value) < 0:
        raise ConfigError(f"checkpoint margin must be >= 0 steps, not {value}")
    return int(value)
