"""Canonical metric vocabulary and the alias table (``aliases.toml`` beside this file).

>>> table = AliasTable.default()
>>> table.resolve(["actor/grad_norm", "grad_norm", "critic/grad_norm"])["actor/grad_norm"]
'grad_norm'
>>> table.resolve(["grad norm"])["grad norm"]
'grad_norm'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from proxydiag.errors import ConfigError
from proxydiag.settings import read_toml

Counter = Literal["per_step", "per_interval", "cumulative"]
_COUNTERS = ("per_step", "per_interval", "cumulative")
DEFAULT_ALIASES = Path(__file__).with_name("aliases.toml")

#: Every mismatch (rollout-vs-learner) metric name starts with this.
MISMATCH_PREFIX = "mismatch"
#: canonical metrics that count skipped optimizer steps (per step or interval, or a running
#: total: the alias table's ``counter`` says which)
#: metrics whose values span orders of magnitude: resampled and compared on a log scale
LOG_SCALE_METRICS: tuple[str, ...] = ("grad_norm", "loss_scale")
SKIP_COUNTERS = ("skipped", "skipped_total")


@dataclass(frozen=True)
class MetricSpec:
    name: str
    keys: tuple[str, ...]
    counter: Counter = "per_step"
    description: str = ""
    #: the family of quantities it belongs to (``kl``, ``logp_diff``, …: rollout-vs-learner
    #: mismatch measured different ways), and what its values mean (perfect, healthy range)
    family: str = ""
    scale: str = ""


@dataclass(frozen=True)
class AliasTable:
    """Ordered aliases per canonical metric, plus normalisation rules for unknown spellings."""

    specs: dict[str, MetricSpec]
    strip_prefixes: tuple[str, ...] = ()
    strip_words: tuple[str, ...] = ()
    _lookup: dict[str, list[tuple[int, str]]] = field(default_factory=dict, repr=False)

    @classmethod
    def default(cls) -> AliasTable:
        """The built-in table (read once, on first use)."""
        return _default_table()

    @classmethod
    def load(cls, *paths: str | Path) -> AliasTable:
        """Load the built-in table, then apply each user TOML file on top (later wins)."""
        data: dict[str, Any] = {}
        for path in (DEFAULT_ALIASES, *[Path(p) for p in paths if Path(p) != DEFAULT_ALIASES]):
            user = read_toml(path, kind="alias file", option="--aliases")
            unknown = sorted(set(user) - {"metrics", "normalise"})
            if unknown:  # a typo such as [metric.loss] would otherwise be ignored silently
                raise ConfigError(
                    f"{path}: unknown table [{unknown[0]}]; use [metrics.NAME] or [normalise]"
                )
            data = _merge(data, user)
        return cls.from_dict(data, origin=str(paths[-1]) if paths else str(DEFAULT_ALIASES))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, origin: str = "<dict>") -> AliasTable:
        specs: dict[str, MetricSpec] = {}
        for name, entry in dict(data.get("metrics", {})).items():
            counter = entry.get("counter", "per_step")
            if counter not in _COUNTERS:
                raise ConfigError(
                    f"{origin}: metrics.{name}.counter is {counter!r}; use one of {_COUNTERS}"
                )
            keys = entry.get("keys", [])
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ConfigError(f"{origin}: metrics.{name}.keys must be a list of strings")
            specs[name] = MetricSpec(
                name,
                tuple(keys),
                counter,
                str(entry.get("description", "")),
                str(entry.get("family", "")),
                str(entry.get("scale", "")),
            )
        norm = dict(data.get("normalise", {}))
        table = cls(
            specs,
            tuple(norm.get("strip_prefixes", ())),
            tuple(norm.get("strip_words", ())),
        )
        for name, spec in specs.items():
            for rank, key in enumerate((*spec.keys, name)):
                for form in {key, table.normalise(key)}:
                    table._lookup.setdefault(form, []).append((rank, name))
        return table

    def normalise(self, key: str) -> str:
        """Fold case and separators, strip framework prefixes.

        >>> AliasTable.default().normalise("train/Number of Skipped-Iterations")
        'skipped_iterations'
        """
        text = re.sub(r"[\s\-.]+", "_", key.strip().lower())
        for prefix in self.strip_prefixes:
            if text.startswith(prefix) and len(text) > len(prefix):
                text = text[len(prefix) :]
                break
        for word in self.strip_words:
            text = text.replace(word, "")
        return text

    def counter(self, metric: str) -> Counter:
        spec = self.specs.get(metric)
        return spec.counter if spec else "per_step"

    def resolve(self, keys: Iterable[str]) -> dict[str, str]:
        """Map each raw key to its metric name (canonical, or the raw key when unmapped).

        For each canonical metric the best-ranked present key wins; an exact match beats a
        normalised one. Losers keep their raw names; a raw name that collides with a taken
        canonical name gets the prefix ``raw:``.
        """
        keys = list(dict.fromkeys(keys))
        candidates: dict[str, list[tuple[int, int, str]]] = {}
        for key in keys:
            for exact, form in ((0, key), (1, self.normalise(key))):
                if exact and form == key:
                    continue
                for rank, name in self._lookup.get(form, []):
                    candidates.setdefault(name, []).append((exact, rank, key))
        taken: dict[str, str] = {}
        for name, cands in candidates.items():
            for _, _, key in sorted(cands, key=lambda c: (c[1], c[0])):
                if key not in taken:
                    taken[key] = name
                    break
        # a key claimed by two metrics keeps the first; resolve losers to raw names
        winners = set(taken.values())
        out: dict[str, str] = {}
        for key in keys:
            found = taken.get(key)
            if found is None:
                found = f"raw:{key}" if key in winners or key in self.specs else key
            out[key] = found
        return out


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@functools.cache
def _default_table() -> AliasTable:
    return AliasTable.load()


def is_mismatch(metric: str) -> bool:
    """True for the rollout-vs-learner mismatch family."""
    return metric.startswith(MISMATCH_PREFIX)
