"""Mixture-of-experts routing: an auxiliary loss that jumps, routing that concentrates.

Evidence, not a label: in MoE runs these often precede a divergence (routing collapse onto a
few experts shows in the load-balancing loss, the max expert load and the router entropy
before the LM loss breaks: ST-MoE, Zoph et al. 2022, §3 on router z-loss and instabilities;
OLMoE, Muennighoff et al. 2024, on load-balancing and router z-loss). Each metric gets the same
sustained change fit as the divergence detector (:mod:`._sustained`): a change that reverts
measures nothing. Events are ``warning``s the taxonomy does not count; the watcher reports how
many steps they led a divergence's own onset.

Thresholds (module constants): a sustained rise of the load-balancing loss or max expert load
to :data:`LOAD_FOLD` (2×) its level before, of the z-loss to :data:`Z_LOSS_FOLD` (3×: it
scales with the square of the router logits), or a fall of the router entropy below
1/:data:`ENTROPY_FOLD` of it, each at least :data:`Z_MIN` robust σ (the divergence detector's
``z_min``).

Per layer (``<metric>_layer_<i>``, Megatron-Core's ``moe/<name>_layer_<i>``: see
``aliases.toml``): the same rule on each routed layer (a layer logging exactly 0 throughout is
a dense one, left out), so that one layer's router going bad while the others stay is named
with its layer; the run-level metric, when the run logs only the layers, is their mean per
step, as Megatron-Core aggregates it (:func:`proxydiag.metrics.mean_over_layers`). A layer
whose router metric turns NaN or ±inf is an overflow in that layer's router: a
``router_nonfinite`` warning naming it (and how many layers did the same), never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from proxydiag.diagnose._stats import safe_log
from proxydiag.diagnose._sustained import Change, sustained_change
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.metrics import layer_families, mean_over_layers, routed_layers
from proxydiag.run import Run

#: the canonical router metrics (``aliases.toml``)
METRICS = ("router_aux_loss", "router_z_loss", "router_entropy", "expert_load_max")
LOAD_FOLD = 2.0
Z_LOSS_FOLD = 3.0
ENTROPY_FOLD = 1.5
Z_MIN = 4.0
#: finite points a series needs to be judged
MIN_POINTS = 12
#: a change flagged in more than this share of the routed layers is the whole router's: told
#: on the run-level metric (with how many layers), not as one layer's
LAYER_SHARE = 0.5


@dataclass(frozen=True)
class _Rule:
    metric: str
    kind: str
    sign: int
    fold: float


RULES = (
    _Rule("router_aux_loss", "router_loss_jump", 1, LOAD_FOLD),
    _Rule("router_z_loss", "router_loss_jump", 1, Z_LOSS_FOLD),
    _Rule("expert_load_max", "router_concentration", 1, LOAD_FOLD),
    _Rule("router_entropy", "router_concentration", -1, ENTROPY_FOLD),
)


NAME = "router"
#: its events decide labels (loss_divergence: router evidence)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads, and their per-layer families."""
    return (*METRICS, *(f"{m}_layer_*" for m in METRICS))


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``router_loss_jump`` and ``router_concentration`` (warnings).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(300)
    >>> aux = np.exp(rng.normal(0, 0.05, 300) + np.where(t < 200, 0.0, 1.5))
    >>> [(e.kind, e.onset_step) for e in detect(from_arrays({"router_aux_loss": (t, aux)}),
    ...                                          DiagnoseConfig())]
    [('router_loss_jump', 200)]
    """
    rv = view(run)
    families = layer_families(rv.series)
    events = []
    for rule in RULES:
        layers = _layers(rv, families.get(rule.metric, {}))
        s = rv.get(rule.metric)
        if s is None and layers:  # only the layers are logged: their mean, as Megatron's
            steps, values = mean_over_layers({i: (x.steps, x.values) for i, x in layers.items()})
            s = Series(rule.metric, steps.astype(np.int64), values)
        event = None
        if s is not None and int(s.finite.sum()) >= MIN_POINTS:
            event = _check(s, rule, cfg)
        events += _per_layer(rule, layers, event, cfg)
    return events


def _layers(rv: RunView, names: dict[int, str]) -> dict[int, Series]:
    """The routed layers' series of one family (dense layers, all zero, left out)."""
    found = {i: s for i, name in names.items() if (s := rv.get(name)) is not None}
    return {i: found[i] for i in routed_layers({i: (s.steps, s.values) for i, s in found.items()})}


def _per_layer(
    rule: _Rule, layers: dict[int, Series], whole: Event | None, cfg: DiagnoseConfig
) -> list[Event]:
    """The run-level event (``whole``, or None) and what the layers add: the layer whose
    router alone went bad, or how many layers moved with the run-level metric."""
    out = [] if whole is None else [whole]
    if not layers:
        return out
    nonfinite = _nonfinite(rule, layers)
    if nonfinite is not None:
        out.append(nonfinite)
    flagged = {}
    for i, s in layers.items():
        if int(s.finite.sum()) >= MIN_POINTS:
            change = _change(s, rule, cfg)
            if change is not None:
                flagged[i] = change
    if not flagged:
        return out
    first = min(flagged, key=lambda i: (flagged[i].onset_step, i))
    change = flagged[first]
    if len(flagged) > LAYER_SHARE * len(layers):
        words = (
            f"{len(flagged)} of {len(layers)} layers, the first layer {first} from step "
            f"{change.onset_step}"
        )
        if whole is not None:
            return [replace(whole, evidence=f"{whole.evidence} ({words})"), *out[1:]]
        who = f"layer {first}'s {rule.metric}"
        return [*out, _event(rule, f"{rule.metric}_layer_{first}", change, f" ({words})", who=who)]
    others = [s for i, s in layers.items() if i not in flagged]
    stay = _within(others, change.onset_step)
    rest = (
        f"; the other {len(others)} layers stay within {stay:.3g}x over the same steps"
        if stay is not None
        else ""
    )
    also = (
        f" (and layers {', '.join(map(str, sorted(set(flagged) - {first})))})"
        if len(flagged) > 1
        else ""
    )
    words = f"layer {first}'s {rule.metric}{also}"
    return [*out, _event(rule, f"{rule.metric}_layer_{first}", change, rest, who=words)]


def _nonfinite(rule: _Rule, layers: dict[int, Series]) -> Event | None:
    """NaN or ±inf in a layer's router metric: an overflow in that layer's router."""
    bad = {i: s for i, s in layers.items() if not bool(s.finite.all())}
    if not bad:
        return None
    first_at = {i: int(s.steps[~s.finite][0]) for i, s in bad.items()}
    first = min(bad, key=lambda i: (first_at[i], i))
    s = bad[first]
    count = int((~s.finite).sum())
    value = float(s.values[~s.finite][0])
    which = (
        f"layer {first}'s {rule.metric}"
        if len(bad) == 1
        else f"{rule.metric} is non-finite in {len(bad)} of {len(layers)} layers "
        f"({', '.join(map(str, sorted(bad)))}); the first, layer {first}'s,"
    )
    others = (
        f"; the other {len(layers) - 1} layers stay finite"
        if len(bad) == 1
        else f"; the other {len(layers) - len(bad)} layers stay finite"
        if len(bad) < len(layers)
        else ""
    )
    return Event(
        "router_nonfinite",
        f"{rule.metric}_layer_{first}",
        first_at[first],
        None,
        "warning",
        0.8 if len(bad) < len(layers) else 0.6,
        f"{which} is {value} at step {first_at[first]} ({count} of its {len(s)} logged points "
        f"non-finite){others}: an overflow in that router (its logits or the aux loss "
        "computed in low precision)",
    )


def _within(others: list[Series], onset: int) -> float | None:
    """The largest fold by which the other layers' median level moved after ``onset``."""
    folds = []
    for s in others:
        ok = s.finite & (s.values > 0)
        before, after = s.values[ok & (s.steps < onset)], s.values[ok & (s.steps >= onset)]
        if before.size and after.size:
            ratio = float(np.median(after) / np.median(before))
            folds.append(max(ratio, 1 / ratio))
    return max(folds) if folds else None


def _check(s: Series, rule: _Rule, cfg: DiagnoseConfig) -> Event | None:
    change = _change(s, rule, cfg)
    return None if change is None else _event(rule, rule.metric, change, "")


def _change(s: Series, rule: _Rule, cfg: DiagnoseConfig) -> Change | None:
    """The sustained change of ``rule`` in ``s`` (log scale), or None."""
    ok = s.finite & (s.values > 0)
    steps, y = s.steps[ok], safe_log(s.values[ok], floor=1e-12)
    if steps.size < MIN_POINTS:
        return None
    change = sustained_change(
        steps.astype(np.float64),
        y,
        sign=rule.sign,
        tail_fraction=cfg.divergence.tail_fraction,
        sigma_floor=1e-3,
        min_after_steps=cfg.spikes.revert_steps,
    )
    if change is None or rule.sign * change.rise < np.log(rule.fold) or change.z < Z_MIN:
        return None
    return change


def _event(rule: _Rule, metric: str, change: Change, tail: str, *, who: str = "") -> Event:
    before, after = float(np.exp(change.before)), float(np.exp(change.after))
    shape = "rises" if rule.sign > 0 else "falls"
    return Event(
        rule.kind,
        metric,
        change.onset_step,
        None,
        "warning",
        float(min(0.9, 0.5 + 0.4 * (1 - Z_MIN / max(change.z, Z_MIN)))),
        f"{who or rule.metric} {shape} from step {change.onset_step}: {before:.4g} before, "
        f"{after:.4g} at the end ({after / before:.3g}x, robust z {change.z:.1f}){tail}; "
        "routing often concentrates before a loss diverges",
    )
