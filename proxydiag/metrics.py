"""Canonical metric vocabulary and the alias table (``aliases.toml`` beside this file).

>>> table = AliasTable.default()
>>> table.resolve(["actor/grad_norm", "grad_norm", "critic/grad_norm"])["actor/grad_norm"]
'grad_norm'
>>> table.resolve(["grad norm"])["grad norm"]
'grad_norm'

Per-layer spellings of the metrics marked ``per_layer`` (the MoE router's) become a layer-indexed
family, ``<canonical>_layer_<index>`` (:func:`layer_of` splits such a name):

>>> keys = ["moe/z_loss_layer_3", "train/moe/moe/load_balancing_loss_layer_0"]
>>> [table.resolve(keys)[k] for k in keys]
['router_z_loss_layer_3', 'router_aux_loss_layer_0']
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

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
    #: logged per layer too: its per-layer spellings resolve to ``<name>_layer_<index>``
    per_layer: bool = False


@dataclass(frozen=True)
class AliasTable:
    """Ordered aliases per canonical metric, plus normalisation rules for unknown spellings."""

    specs: dict[str, MetricSpec]
    strip_prefixes: tuple[str, ...] = ()
    strip_words: tuple[str, ...] = ()
    #: regexes of per-layer spellings (named groups ``pre``, ``layer``, ``post``)
    layer_patterns: tuple[re.Pattern[str], ...] = ()
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
            unknown = sorted(set(user) - {"metrics", "normalise", "layers"})
            if unknown:  # a typo such as [metric.loss] would otherwise be ignored silently
                raise ConfigError(
                    f"{path}: unknown table [{unknown[0]}]; use [metrics.NAME], [normalise] "
                    "or [layers]"
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
                bool(entry.get("per_layer", False)),
            )
        norm = dict(data.get("normalise", {}))
        table = cls(
            specs,
            tuple(norm.get("strip_prefixes", ())),
            tuple(norm.get("strip_words", ())),
            _layer_patterns(dict(data.get("layers", {})).get("patterns", []), origin),
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
        taken.update(self._per_layer([k for k in keys if k not in taken]))
        # a key claimed by two metrics keeps the first; resolve losers to raw names
        winners = set(taken.values())
        out: dict[str, str] = {}
        for key in keys:
            found = taken.get(key)
            if found is None:
                found = f"raw:{key}" if key in winners or key in self.specs else key
            out[key] = found
        return out

    def _per_layer(self, keys: list[str]) -> dict[str, str]:
        """Per-layer keys -> ``<canonical>_layer_<index>``. Per canonical metric one spelling
        wins for every layer (the best-ranked base key, as :meth:`resolve` ranks keys); the
        keys of other spellings keep their raw names."""
        if not self.layer_patterns:
            return {}
        found: dict[str, list[tuple[tuple[int, int, int], str, str, str]]] = {}
        for key in keys:
            split = self._split_layer(key)
            if split is None:
                continue
            base, layer = split
            best = self._base_metric(base)
            if best is not None:
                rank, name = best
                found.setdefault(name, []).append((rank, base, key, f"{name}_layer_{layer}"))
        out: dict[str, str] = {}
        for cands in found.values():
            rank, base = min((c[0], c[1]) for c in cands)
            seen: set[str] = set()
            for r, b, key, metric in cands:
                if (r, b) == (rank, base) and metric not in seen:
                    seen.add(metric)
                    out[key] = metric
        return out

    def _split_layer(self, key: str) -> tuple[str, int] | None:
        for pattern in self.layer_patterns:
            m = pattern.match(key)
            if m is None:
                continue
            groups = m.groupdict()
            parts = [str(groups.get(part) or "").strip("/._") for part in ("pre", "post")]
            base = "/".join(p for p in parts if p)
            if base:
                return base, int(m.group("layer"))
        return None

    def _base_metric(self, base: str) -> tuple[tuple[int, int, int], str] | None:
        """The per-layer metric ``base`` names and its rank (path parts dropped, exactness,
        alias rank: lower is better), or None."""
        parts = re.split(r"[/.]", base)
        for dropped in range(len(parts)):
            key = "/".join(parts[dropped:])
            for exact, form in ((0, key), (1, self.normalise(key))):
                hits = [
                    (rank, name)
                    for rank, name in self._lookup.get(form, [])
                    if self.specs[name].per_layer
                ]
                if hits:
                    rank, name = min(hits)
                    return (dropped, exact, rank), name
        return None


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _layer_patterns(patterns: object, origin: str) -> tuple[re.Pattern[str], ...]:
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise ConfigError(f"{origin}: layers.patterns must be a list of strings")
    out = []
    for text in patterns:
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise ConfigError(
                f"{origin}: layers.patterns: {text!r} is not a regex ({exc})"
            ) from None
        if "layer" not in pattern.groupindex or not {"pre", "post"} & set(pattern.groupindex):
            raise ConfigError(
                f"{origin}: layers.patterns: {text!r} needs the groups (?P<layer>...) and "
                "(?P<pre>...) or (?P<post>...)"
            )
        out.append(pattern)
    return tuple(out)


#: a per-layer metric name: ``<canonical>_layer_<index>``
_LAYERED = re.compile(r"^(?P<base>.+)_layer_(?P<layer>\d+)$")


def layer_of(metric: str) -> tuple[str, int] | None:
    """``(base metric, layer index)`` of a per-layer metric name, else None.

    >>> layer_of("router_z_loss_layer_12"), layer_of("router_z_loss")
    (('router_z_loss', 12), None)
    """
    m = _LAYERED.match(metric)
    return (m.group("base"), int(m.group("layer"))) if m else None


def layer_families(metrics: Iterable[str]) -> dict[str, dict[int, str]]:
    """Per base metric, its per-layer metrics among ``metrics`` by layer index.

    >>> layer_families(["loss", "router_z_loss_layer_2", "router_z_loss_layer_0"])
    {'router_z_loss': {0: 'router_z_loss_layer_0', 2: 'router_z_loss_layer_2'}}
    """
    out: dict[str, dict[int, str]] = {}
    for metric in sorted(metrics):
        split = layer_of(metric)
        if split is not None:
            out.setdefault(split[0], {})[split[1]] = metric
    return {base: dict(sorted(layers.items())) for base, layers in sorted(out.items())}


def routed_layers(series: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> list[int]:
    """The layers that have a router: a layer whose values are exactly 0 at every logged step
    is a dense layer (Megatron-Core logs a zero for every layer without experts) and is left
    out; NaN and ±inf are values, so a layer that logged one is kept."""
    return [
        layer
        for layer, (_, values) in sorted(series.items())
        if values.size and not bool(np.all(values == 0.0))
    ]


def mean_over_layers(
    series: Mapping[int, tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """The run-level series of a per-layer family: at each logged step, the mean over the
    routed layers (:func:`routed_layers`) that logged it, as Megatron-Core aggregates its own
    (the sum over MoE layers / their number). A non-finite layer makes that step's mean
    non-finite: NaN and ±inf are kept, never skipped.

    >>> nan = float("nan")
    >>> s, v = mean_over_layers({0: (np.array([1, 2]), np.array([1.0, 3.0])),
    ...                          1: (np.array([1, 2]), np.array([3.0, nan])),
    ...                          2: (np.array([1, 2]), np.array([0.0, 0.0]))})
    >>> s.tolist(), v.tolist()
    ([1, 2], [2.0, nan])
    """
    layers = routed_layers(series) or sorted(series)
    steps = np.concatenate([np.asarray(series[k][0]) for k in layers])
    values = np.concatenate([np.asarray(series[k][1], dtype=np.float64) for k in layers])
    if steps.size == 0:
        return steps, values
    uniq, inverse = np.unique(steps, return_inverse=True)
    total = np.zeros(uniq.size)
    np.add.at(total, inverse, values)
    count = np.bincount(inverse, minlength=uniq.size)
    return uniq, total / count


@functools.cache
def _default_table() -> AliasTable:
    return AliasTable.load()


def is_mismatch(metric: str) -> bool:
    """True for the rollout-vs-learner mismatch family."""
    return metric.startswith(MISMATCH_PREFIX)
