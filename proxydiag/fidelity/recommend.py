"""How small may a proxy be? The smallest proxy of a pruning sweep that is faithful in every phase.

A group holds full runs and proxies at several pruning levels. Each level is one compared proxy
(:class:`~proxydiag.fidelity.result.Comparison`, or its JSON), with its cost:

* ``kept_fraction`` = ``experts_kept / experts_total`` when both are known (models of different
  sizes then share one axis), else ``None`` and the levels are ordered by ``experts_kept``;
* ``saving`` = 1 − the proxy's ``cost_per_step`` over the full run's (1.0 when the full run's is
  not known: ``cost_per_step`` is then taken as relative to it), else 1 − ``kept_fraction``
  (experts dominate an MoE step's cost; an approximation, said so in ``saving_basis``).

A level qualifies when its verdict is ``faithful`` and every phase of it is ``faithful`` (an
``undecidable`` phase is not agreement: :mod:`proxydiag.fidelity.phases`). The recommended proxy
is the qualifying level with the fewest experts kept (else the lowest cost); with none, there
is no recommendation and ``reason`` says what failed at each level.

>>> rec = recommend([
...     {"proxy_run": "p32", "fidelity": 0.93, "verdict": "faithful", "phases": [
...         {"name": "pre_fault", "verdict": "faithful", "ci": [0.9, 0.96]},
...         {"name": "fault", "verdict": "faithful", "ci": [0.88, 0.95]}]},
...     {"proxy_run": "p8", "fidelity": 0.8, "verdict": "partial", "phases": [
...         {"name": "pre_fault", "verdict": "partial", "ci": [0.7, 0.82]},
...         {"name": "fault", "verdict": "faithful", "ci": [0.85, 0.93]}]}],
...     costs={"p32": ProxyCost(experts_kept=32, experts_total=64, cost_per_step=0.47),
...            "p8": ProxyCost(experts_kept=8, experts_total=64, cost_per_step=0.11)})
>>> rec.recommended.proxy_run, rec.recommended.kept_fraction, rec.recommended.saving
('p32', 0.5, 0.53)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from proxydiag.fidelity.result import Comparison


@dataclass(frozen=True)
class ProxyCost:
    """What a proxy keeps and costs (catalog / sidecar fields; any may be unknown)."""

    experts_kept: float | None = None
    experts_total: float | None = None
    cost_per_step: float | None = None

    @classmethod
    def of(cls, attrs: Mapping[str, Any]) -> ProxyCost:
        """From a run's attributes (``Run.attrs``) or a catalog row; unreadable values are None.

        >>> ProxyCost.of({"experts_kept": "8", "experts_total": 64, "cost_per_step": None})
        ProxyCost(experts_kept=8.0, experts_total=64.0, cost_per_step=None)
        """
        return cls(
            *(_number(attrs.get(k)) for k in ("experts_kept", "experts_total", "cost_per_step"))
        )


@dataclass(frozen=True)
class Level:
    """One pruning level of a group: its proxy, cost and fidelity per phase."""

    proxy_run: str
    experts_kept: float | None
    kept_fraction: float | None
    saving: float | None
    saving_basis: str
    fidelity: float | None
    ci: tuple[float, float] | None  # the lowest phase interval (the phase that decides)
    verdict: str
    phases: dict[str, str]
    qualifies: bool
    why: str


@dataclass(frozen=True)
class Recommendation:
    """The levels of one group, smallest first, and the smallest faithful one (or None)."""

    group: str
    levels: tuple[Level, ...]
    recommended: Level | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "levels": [asdict(lv) for lv in self.levels],
            "recommended": self.recommended.proxy_run if self.recommended else None,
            "reason": self.reason,
        }


def recommend(
    comparisons: Sequence[Comparison | Mapping[str, Any]],
    *,
    costs: Mapping[str, ProxyCost],
    group: str = "",
    full_cost_per_step: float | None = None,
) -> Recommendation:
    """The smallest proxy faithful in every phase among ``comparisons`` (one per level).

    Parameters
    ----------
    comparisons
        :class:`Comparison` objects or their ``to_dict()`` JSON (as the store keeps them).
    costs
        Proxy run id -> :class:`ProxyCost`.
    group
        The group's name (reported).
    full_cost_per_step
        The full run's cost per step, when known (else proxies' costs are relative to it).
    """
    levels = sorted(
        (_level(_as_dict(c), costs, full_cost_per_step) for c in comparisons), key=_size
    )
    good = [lv for lv in levels if lv.qualifies]
    if good:
        best = good[0]
        reason = f"{best.proxy_run}: the smallest proxy faithful in every phase" + (
            f", saving {best.saving:.0%} of the accelerator time per step"
            if best.saving is not None
            else ""
        )
    else:
        best = None
        reason = (
            "no proxy is faithful in every phase: "
            + "; ".join(f"{lv.proxy_run} {lv.why}" for lv in levels)
            if levels
            else "no compared proxy"
        )
    return Recommendation(group, tuple(levels), best, reason)


def _as_dict(c: Comparison | Mapping[str, Any]) -> Mapping[str, Any]:
    return c.to_dict() if isinstance(c, Comparison) else c


def _level(c: Mapping[str, Any], costs: Mapping[str, ProxyCost], full_cost: float | None) -> Level:
    proxy = str(c.get("proxy_run", ""))
    cost = costs.get(proxy, ProxyCost())
    fraction = (
        cost.experts_kept / cost.experts_total
        if cost.experts_kept is not None and cost.experts_total
        else None
    )
    saving, basis = _saving(cost, fraction, full_cost)
    phases = {str(p["name"]): str(p["verdict"]) for p in c.get("phases") or []}
    intervals = [tuple(p["ci"]) for p in c.get("phases") or [] if p.get("ci")]
    ci = min(intervals, key=lambda iv: iv[0]) if intervals else None
    verdict = str(c.get("verdict", ""))
    off = {name: v for name, v in phases.items() if v != "faithful"}
    qualifies = verdict == "faithful" and not off
    why = (
        "faithful in every phase"
        if qualifies
        else f"is {verdict}"
        + (" (" + ", ".join(f"{n} {v}" for n, v in off.items()) + ")" if off else "")
    )
    return Level(
        proxy,
        cost.experts_kept,
        None if fraction is None else round(fraction, 4),
        saving,
        basis,
        c.get("fidelity"),
        None if ci is None else (float(ci[0]), float(ci[1])),
        verdict,
        phases,
        qualifies,
        why,
    )


def _saving(
    cost: ProxyCost, fraction: float | None, full_cost: float | None
) -> tuple[float | None, str]:
    if cost.cost_per_step is not None:
        base = full_cost if full_cost else 1.0
        return round(1.0 - cost.cost_per_step / base, 4), (
            "cost_per_step against the full run's"
            if full_cost
            else "cost_per_step, relative to the full run's (1.0)"
        )
    if fraction is not None:
        return round(1.0 - fraction, 4), "1 - experts kept fraction (cost per step unknown)"
    return None, "unknown (no cost_per_step, no experts_kept/experts_total)"


def _number(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x == x else None


def _size(level: Level) -> tuple[float, float]:
    """Smallest first: by kept fraction (else experts kept), then by saving (largest first)."""
    size = (
        level.kept_fraction
        if level.kept_fraction is not None
        else (level.experts_kept if level.experts_kept is not None else float("inf"))
    )
    return (float(size), -(level.saving if level.saving is not None else 0.0))
