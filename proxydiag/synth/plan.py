"""Planning a corpus: which groups, runs, faults, formats and namings it holds.

A *group* is one full run (three seeds) and its proxies at 50%, 25% and 12.5% of the
experts. Groups cycle through healthy runs and every fault variant, precisions and log
intervals; proxies cycle through their relations to the full run
(:mod:`proxydiag.synth.proxy`). A group uses one framework naming (as a team runs its full
run and its proxies on one stack, so their metrics overlap): the least-used naming that can
show the group's fault. Each run then gets the least-used format of that naming that can
show its own fault (:func:`proxydiag.synth.naming.can_show`), so every format and naming
occurs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from proxydiag.errors import ConfigError
from proxydiag.synth.naming import can_show, shows_relation
from proxydiag.synth.proxy import RELATION_DYNAMICS, RELATION_WHY, proxy_fault
from proxydiag.synth.scenario import ROUTING_VARIANTS, START_VARIANTS, FaultSpec, Scenario

#: the group cycle: a quarter healthy, a quarter per failure class ("overflow" follows precision)
GROUP_CYCLE = (
    "healthy",
    "overflow",
    "divergence",
    "sync_step",
    "healthy",
    "overflow",
    "divergence",
    "gradual_climb",
    "healthy",
    "overflow",
    "divergence",
    "climb_then_divergence",
)
#: variants the group cycle names (the overflow variants through "overflow")
#: proxy relations that move a fault's onset (a fault from the first step has none to move)
_TIMED = frozenset({"late", "early"})
_CYCLED = frozenset(GROUP_CYCLE) | {"fp16_scaler_collapse", "bf16_nonfinite"}
#: relation cycles of proxies: about 40% faithful
FAULTY_CYCLE = (
    "reproduce",
    "late",
    "stall",
    "reproduce",
    "miss",
    "grads",
    "reproduce",
    "early",
    "wrong",
    "collapse",
    "reproduce",
    "dynamics",
)
HEALTHY_CYCLE = ("reproduce", "extra", "reproduce", "trend", "dynamics")
KEPT_FRACTIONS = (0.5, 0.25, 0.125)
EXPERTS_TOTAL = 64
N_FULL_SEEDS = 3


@dataclass(frozen=True)
class PlannedRun:
    scenario: Scenario
    seed: int
    fmt: str
    naming: str
    log_interval: int
    relation: str = ""

    @property
    def name(self) -> str:
        return self.scenario.name


class Planner:
    """Assigns groups, faults, formats and namings; deterministic from ``seed``."""

    def __init__(
        self,
        *,
        seed: int,
        formats: Sequence[str],
        namings: Sequence[str],
        log_intervals: Sequence[int],
        precisions: Sequence[str],
        steps: int | None,
        variants: Sequence[str],
    ) -> None:
        if not formats or not namings or not log_intervals or not precisions or not variants:
            raise ConfigError(
                "formats, namings, log_intervals, precisions and variants must not be empty"
            )
        self.seed, self.formats, self.namings = seed, tuple(formats), tuple(namings)
        self.intervals, self.precisions, self.steps = tuple(log_intervals), tuple(precisions), steps
        self.variants = tuple(variants)
        #: a corpus that asks for a routing variant logs the routing shares in every run
        self.routing = any(v in ROUTING_VARIANTS for v in self.variants)
        self.used: Counter[str] = Counter()
        self.relation_count: Counter[str] = Counter()

    def group(self, g: int) -> list[PlannedRun]:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, g, 3]))
        precision = self.precisions[(g + g // 4) % len(self.precisions)]
        interval = self.intervals[g % len(self.intervals)]
        n_steps = self.steps or int(rng.integers(300, 601))
        group_seed = int(np.random.SeedSequence([self.seed, g]).generate_state(1)[0])
        fault = self._full_fault(g, precision, n_steps, rng)
        naming = self._naming(fault.variant if fault else "", precision, rng)
        base = group_scenario(
            f"g{g:02d}",
            n_steps=n_steps,
            precision=precision,
            group_seed=group_seed,
            fault=fault,
            routing=self.routing,
        )
        runs = []
        for k in range(N_FULL_SEEDS):
            sc = full_seed(base, k)
            runs.append(self._place(sc, seed=k, naming=naming, interval=interval, rng=rng))
        for frac in KEPT_FRACTIONS:
            runs.append(self._proxy(base, frac, naming, interval, rng))
        return runs

    def _full_fault(
        self, g: int, precision: str, n_steps: int, rng: np.random.Generator
    ) -> FaultSpec | None:
        # variants the cycle does not name (asked for on their own: policy_collapse, the
        # precision kinds) follow it; a corpus of the default variants is the one it was
        cycle = (*GROUP_CYCLE, *(v for v in self.variants if v not in _CYCLED))
        for i in range(len(cycle)):
            kind = cycle[(g + i) % len(cycle)]
            if kind == "overflow":
                kind = "fp16_scaler_collapse" if precision == "fp16" else "bf16_nonfinite"
            if kind != "healthy" and kind not in self.variants:
                continue
            variant = "" if kind == "healthy" else kind
            if not self._combos(variant, precision):
                continue
            if not variant:
                return None
            nan_after = int(n_steps * rng.uniform(0.12, 0.25)) if rng.random() < 0.6 else None
            if variant not in ("divergence", "climb_then_divergence"):
                nan_after = None
            onset = int(n_steps * rng.uniform(0.3, 0.55))
            return FaultSpec(variant, 1 if variant in START_VARIANTS else onset, nan_after)
        raise ConfigError("no requested format/naming can show any requested scenario")

    def _naming(self, variant: str, precision: str, rng: np.random.Generator) -> str:
        names = sorted({n for _, n in self._combos(variant, precision)})
        ties = rng.permutation(len(names))
        return min(zip(names, ties, strict=True), key=lambda nt: (self.used[nt[0]], nt[1]))[0]

    def _proxy(
        self, base: Scenario, frac: float, naming: str, interval: int, rng: np.random.Generator
    ) -> PlannedRun:
        cycle = FAULTY_CYCLE if base.fault else HEALTHY_CYCLE
        kind = "faulty" if base.fault else "healthy"
        kept = int(EXPERTS_TOTAL * frac)
        start = self.relation_count[kind]
        for i in range(len(cycle)):
            relation = cycle[(start + i) % len(cycle)]
            fault = proxy_fault(
                base.fault, relation, n_steps=base.n_steps, precision=base.precision, rng=rng
            )
            if (
                self._combos(fault.variant if fault else "", base.precision, naming)
                and shows_relation(naming, relation, precision=base.precision)
                and not (fault and fault.variant in START_VARIANTS and relation in _TIMED)
            ):
                break
        self.relation_count[kind] += 1
        sc = proxy_scenario(base, kept=kept, fault=fault, relation=relation)
        return self._place(sc, seed=0, naming=naming, interval=interval, rng=rng, relation=relation)

    def _combos(
        self, variant: str, precision: str, naming: str | None = None
    ) -> list[tuple[str, str]]:
        namings = self.namings if naming is None else (naming,)
        return [
            (f, n)
            for f in self.formats
            for n in namings
            if can_show(n, f, variant=variant, precision=precision, routing=self.routing)
        ]

    def _place(
        self,
        sc: Scenario,
        *,
        seed: int,
        naming: str,
        interval: int,
        rng: np.random.Generator,
        relation: str = "",
    ) -> PlannedRun:
        combos = self._combos(sc.fault.variant if sc.fault else "", sc.precision, naming)
        if not combos:
            raise ConfigError(f"{sc.name}: no requested format/naming can show this run's fault")
        ties = rng.permutation(len(combos))
        best = min(
            range(len(combos)),
            key=lambda i: (self.used[combos[i][0]] + self.used[combos[i][1]], ties[i]),
        )
        fmt, naming = combos[best]
        self.used.update([fmt, naming])
        return PlannedRun(sc, seed, fmt, naming, interval, relation)


def group_scenario(
    group: str,
    *,
    n_steps: int,
    precision: str,
    group_seed: int,
    fault: FaultSpec | None,
    routing: bool = False,
) -> Scenario:
    """The full run of a group, every expert kept, as its first seed ``<group>-full-s0``."""
    return Scenario(
        f"{group}-full-s0",
        n_steps=n_steps,
        precision=precision,
        group_seed=group_seed,
        experts_total=EXPERTS_TOTAL,
        experts_kept=EXPERTS_TOTAL,
        fault=fault,
        group=group,
        routing=routing,
    )


def full_seed(base: Scenario, k: int) -> Scenario:
    """Seed ``k`` of the group's full run (:func:`group_scenario`)."""
    return replace(base, name=f"{base.group}-full-s{k}")


def proxy_scenario(
    base: Scenario, *, kept: int, fault: FaultSpec | None, relation: str
) -> Scenario:
    """The proxy of ``base`` keeping ``kept`` experts, its ``fault`` and dynamics following its
    ``relation`` to the full run (:mod:`proxydiag.synth.proxy`)."""
    return replace(
        base,
        name=f"{base.group}-proxy-e{kept}",
        experts_kept=kept,
        fault=fault,
        dynamics=RELATION_DYNAMICS.get(relation, "normal"),
        role="proxy",
    )


def why(relation: str) -> str:
    return RELATION_WHY[relation]
