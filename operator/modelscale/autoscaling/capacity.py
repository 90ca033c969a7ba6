"""Per-replica capacity and latency model, learned online.

Observations are (output tokens/s per *warmed* replica, P99 of the chosen latency
signal). The load axis is cut into `bins` bins of `bin_fraction` x the spec's
tokensPerSecondPerReplica each; a bin keeps an EWMA of the P99 seen at that load and a
count. The latency curve is the isotonic (pool-adjacent-violators) fit of the bins' P99
over load, weighted by their counts: more load never predicts less latency, and one noisy
bin is averaged with its neighbours instead of lifting every heavier load (a running
maximum would). It is interpolated between bin centres. Once a bin has data, a new P99
is clipped to [1/3, 3] x the bin's value before the EWMA, so one burst moves it little.

Effective capacity (tokens/s per replica at the SLO):
- fewer than `min_points` observations: the spec's value;
- a bin whose envelope exceeds the SLO: the load where the envelope crosses the SLO;
- no violation seen: the spec's value (with max_ratio > 1, raised above it only as far
  as loads that were actually observed meeting the SLO);
- every update moves the capacity by at most `max_change` (10 %), so a few odd samples
  cannot swing the replica count;
- it always stays within [min_ratio, max_ratio] = [0.5, 1.0] x the spec's value: the
  spec is a ceiling, and the model lowers it when P99 shows the spec is optimistic.

The recommender's model (`state.CAPACITY`) sets `probe`, `knee`, `grow_below`,
`forget_every`, `extrapolate` and the served rule (`served_below`, `served_cliff_below`):
the spec's value is then a prior, moved up as well as down by the pods' metrics
(docs/policy.md); the class defaults keep the ceiling behaviour described above
(`PolicyConfig.adaptive = False`).

Limits, seen in the trace simulator: the P99 at a 1-minute load per replica also depends
on the request mix and on bursts (Azure code traffic violates TTFT at low average load),
and the policy sees one latency signal only, so a TPOT breach under a TTFT SLO is not
learned. The model corrects a spec that is somewhat off; it does not replace a load test.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

_NUMBERS = frozenset((int, float, type(None)))
_INTS = frozenset((int,))


@dataclass(frozen=True, slots=True)
class LatencyCurve:
    """Monotone P99 over load per replica: (bin centre, P99) points, `width` apart when
    adjacent. Between adjacent bins the P99 is interpolated; across a gap (no data in
    between) it is the lighter bin's value — linear interpolation from a quiet bin to a
    far heavier overloaded one would invent a violation in the unseen middle."""

    points: tuple[tuple[float, float], ...]
    width: float

    def p99(self, load: float) -> float | None:
        """Predicted P99 at `load`; None below the lightest load seen (no evidence).
        Beyond the heaviest load seen, its value (no extrapolation: the capacity bound
        covers the unseen range)."""
        env = self.points
        if not env or load < env[0][0]:
            return None
        for (x0, p0), (x1, p1) in itertools.pairwise(env):
            if load < x1:
                if x1 - x0 <= self.width * 1.01:
                    return p0 + (p1 - p0) * (load - x0) / (x1 - x0)
                return p0
        return env[-1][1]


@dataclass(frozen=True, slots=True)
class CapacityState:
    scale: float = 0.0  # the spec target the bins were cut for; a new target resets them
    p99: tuple[float | None, ...] = ()
    n: tuple[int, ...] = ()
    total: int = 0
    capacity: float | None = None  # learned tokens/s per replica at the SLO
    # The lightest P99 a bin with enough points has held (CapacityModel.anchored); None:
    # none yet.
    low: float | None = None
    # The latency curve of this state, when already computed (not serialised).
    curve: LatencyCurve | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class CapacityModel:
    bins: int = 16
    bin_fraction: float = 0.125  # bins cover 0 .. 2x the spec's per-replica target
    alpha: float = 0.2
    min_points: int = 20
    min_bin_points: int = 3
    max_change: float = 0.1
    max_weight: int = 50  # cap on a bin's count in the fit, so old bins do not dominate
    # The learned capacity stays within these multiples of the spec's value: the spec is
    # the user's load test; P99 at a 1-minute load also moves with the request mix and
    # with bursts, which must not halve the fleet. By default it is never raised above
    # the spec: in the trace simulator, capacity learned up to 1.5x on a light request
    # mix let the fleet shrink to one replica when the mix changed (P99 TTFT 45 s).
    min_ratio: float = 0.5
    max_ratio: float = 1.0
    # Share of the SLO at which the latency curve marks the knee: capacity is the load
    # where the fitted P99 crosses `knee` x SLO (1.0: the SLO itself).
    knee: float = 1.0
    # With no crossing seen, the capacity may rise to `probe` x the heaviest load seen
    # within the SLO (and is never lowered for lack of a crossing): the spec's value is
    # then only a prior that the pods' own metrics move up as well as down. None: no
    # crossing means the spec's value (raised only as far as loads seen safe).
    probe: float | None = None
    # ... and only while the fitted P99 at the heaviest load seen is below this share of
    # the SLO: between it and `knee` the capacity holds.
    grow_below: float = 1.0
    # Every this many observations all bin counts halve, so a bin not seen again drops
    # out of the fit (below `min_bin_points`) within a few periods: the knee is learned
    # from recent load, and one busy burst does not pin the capacity for hours once the
    # fleet no longer runs at that load. 0: never forget.
    forget_every: int = 0
    # With no crossing seen, continue the fitted curve to knee x SLO (see observe).
    extrapolate: bool = False
    # Direct evidence from a busier sample than a calm one: a load per replica served
    # with the worst watched P99 under `served_below` x SLO while the cliff signal (TTFT:
    # queueing, which jumps at saturation; observe's `cliff`) stays under
    # `served_cliff_below` x SLO raises the capacity to that load at once, never past it.
    # TPOT rises gradually with the batch and sits at 0.6-0.8 of its SLO at ordinary
    # loads, so the calm rule (`grow_below`, on the worst signal) rarely sees it calm and
    # the capacity stayed at the prior while the pods served far more. None: off.
    served_below: float | None = None
    served_cliff_below: float = 0.0
    # With `probe` set, while both this sample and the heaviest load seen are calm (under
    # `grow_below` x SLO), let the capacity rise by this share of itself per observation,
    # beyond any load seen: a fleet sized by a prior far below the pods' capacity runs at
    # about 0.75 of it and so never sees the loads a probe near 1 needs (docs/policy.md,
    # "Seventh split"). Growth stops once the pods are no longer calm; a busy sample
    # lowers the capacity at once. None: off (the default; measured, not frozen).
    calm_step: float | None = None
    # The same creep from a sample served by a looser rule than calm: the worst watched
    # P99 under `served_step_below` and the cliff signal (TTFT) under
    # `served_step_cliff_below` x SLO, at a load per replica of at least
    # `served_step_load` x the estimate, while the heaviest load seen is under the knee.
    # TPOT sits at 0.4-0.5 of its SLO and TTFT at 0.3-0.4 at loads the pods serve well
    # (servegen-m-large-d11-night: 672 tok/s learned, 950-1,090 sustained), between the
    # calm and served rules, and a fleet sized from the estimate never shows a load above
    # it (docs/policy.md, "Twelfth split", H7). None: off.
    served_step: float | None = None
    # The calm and served steps raise the capacity no further than this multiple of the
    # heaviest load per replica the fitted curve shows within the knee (`tested_load`):
    # they grow it beyond any load seen, and carried it to 3x the load it was measured
    # at on servegen-m-small-d6-pm (728 tok/s from pods serving 250; the load test says
    # 453), where a scale-down then saturated the pods (docs/policy.md, "Seventeenth
    # split"). None: unbounded (the default; measured, not frozen).
    step_reach: float | None = None
    # Where the curve crosses the knee between a bin within it and a slower one, place the
    # crossing with 1 / P99 linear between the two (the shape queueing and a filling batch
    # give, as `anchored` assumes) instead of P99 linear. P99 stays near its
    # floor until close to saturation and then climbs steeply, so a straight line from a
    # calm bin to a saturated one puts the crossing near the calm one: one replica serving
    # 340 tok/s with TTFT at 1.5-6x its SLO lowered the estimate to 119 tok/s, and the
    # fleet held 5-6 replicas where 2 served for 25 minutes, until the slow bin was
    # forgotten (servegen-m-small-d9 with a 1,000 tok/s prior; docs/policy.md, "Twentieth
    # split"). False: P99 linear. The policy's model (state.CAPACITY) sets it True since the
    # twenty-first round's rule chose it (docs/policy.md, "Twenty-first split").
    hyperbolic_crossing: bool = False
    served_step_below: float = 0.6
    served_step_cliff_below: float = 0.4
    served_step_load: float = 0.7
    # From a sample whose bin's P99 lies between the served rule (`served_below`) and the
    # knee, bound the capacity by the load where 1 / P99, falling linearly with the load
    # from 1 / `low` (the lightest P99 a bin has held), reaches 1 / (`anchored` x SLO).
    # Chunked prefill and a filling batch both make P99 grow as 1 / (1 - utilisation),
    # so 1 / P99 is linear in the load; `low` is at least the P99 at zero load, and a
    # larger intercept puts the knee further out, so the bound errs towards the capacity
    # it lowers. A pressure between the two rules otherwise teaches nothing when every
    # sample falls in one bin (docs/policy.md, "Ninth split", H1). The share of the SLO
    # the line is continued to: the knee, or the SLO itself (1.0) for a looser bound.
    # None: off.
    anchored: float | None = None
    # Where the lightest bin of the curve is already past the knee by this multiple or
    # more (P99 >= `saturated_edge` x knee x SLO), the capacity is no lower than that
    # bin's lower edge: a P99 many times the SLO at a load is a queue growing at a pod
    # that saturates near that load, not a service that slows in proportion to it.
    # Scaling the load by SLO / P99 (the rule otherwise) read one pod serving ~350 tok/s
    # with a 17 s P99 as a capacity of 42, and the estimate walked down by `max_change`
    # each pass to 99 tok/s while 2-4 pods served 137-202 tok/s each at 0.02 of the SLO
    # (servegen-m-small-d11-morning seed 0; docs/policy.md, "Thirty-third round"). The
    # gap rule of `_capacity_estimate` already places a slow bin's crossing at its lower
    # edge when a calm bin lies below it. None: off.
    saturated_edge: float | None = None
    # Forgetting halves a bin's count, not its P99: a bin that dropped out of the fit
    # keeps the value it had, and new samples move it by `alpha` each, so for several
    # samples the fit reads the old value as if measured now. On
    # servegen-m-large-d3-late seed 0 the 200-300 tok/s bin kept a pressure of 1.07 from
    # the slice's first minutes (a heavier mix) for 25 minutes; back in the fit with
    # samples at 0.4-0.5 it read 0.94, 0.84, 0.78, and the curve's slope lowered the
    # estimate from 300 to 243 tok/s (docs/policy.md, "Thirty-fifth round, second
    # round"). `restart_below` > 0: a bin whose count is below it takes the new sample
    # as its P99 (0: never). `count_weighted`: a sample moves the bin by
    # max(`alpha`, 1 / (count + 1)), the running mean of what the count still holds.
    # Both off in the class (the ceiling model); the policy's model (`state.CAPACITY`)
    # sets `restart_below` 1 since the thirty-fifth round's second round chose it.
    restart_below: int = 0
    count_weighted: bool = False

    def initial(self, *, target: float) -> CapacityState:
        return CapacityState(scale=target, p99=(None,) * self.bins, n=(0,) * self.bins)

    def _width(self, state: CapacityState) -> float:
        return state.scale * self.bin_fraction

    def observe(
        self,
        state: CapacityState,
        *,
        load: float,
        p99: float,
        target: float,
        slo: float,
        cliff: float | None = None,
    ) -> CapacityState:
        """One (load per warmed replica, P99) pair. `p99` is the worst watched signal in
        units of `slo`; `cliff`, in the same units, the one that jumps at saturation (TTFT)
        when the worst may be a gradual one (TPOT). None: `p99` is both."""
        if state.scale != target or len(state.p99) != self.bins:
            state = self.initial(target=target)
        if not (math.isfinite(load) and math.isfinite(p99)) or load < 0.0 or p99 < 0.0:
            return state
        if cliff is None or not math.isfinite(cliff):
            cliff = p99
        served = (
            self.served_below is not None
            and p99 <= slo * self.served_below
            and cliff <= slo * self.served_cliff_below
        )
        # Direct evidence: this load per replica was served well within the SLO.
        calm = self.probe is not None and p99 <= slo * self.grow_below
        # ... or close to breaking it: the capacity is at most this load.
        busy = self.probe is not None and p99 > slo * self.knee
        # As a ratio first: a huge load over a narrow bin is infinity, and int() of it raises.
        ratio = load / self._width(state)
        b = self.bins - 1 if ratio >= self.bins else int(ratio)
        p99s = list(state.p99)
        ns = list(state.n)
        old = p99s[b]
        if ns[b] < self.restart_below:
            old = None  # forgotten: the bin starts again from this sample
        if old is not None and ns[b] >= self.min_bin_points and old > 0.0:
            p99 = min(max(p99, old / 3.0), old * 3.0)
        weight = max(self.alpha, 1.0 / (ns[b] + 1)) if self.count_weighted else self.alpha
        # Rounded when written so that to_dict is a plain copy (it runs on every call).
        p99s[b] = float(f"{p99 if old is None else old + weight * (p99 - old):.5g}")
        ns[b] = min(ns[b] + 1, 1_000_000)
        if self.forget_every and (state.total + 1) % self.forget_every == 0:
            ns = [n // 2 for n in ns]
        low = state.low
        here = p99s[b]
        if self.anchored is not None and ns[b] >= self.min_bin_points and here is not None:
            low = here if low is None else min(low, here)
        new = CapacityState(
            scale=state.scale,
            p99=tuple(p99s),
            n=tuple(ns),
            total=state.total + 1,
            capacity=state.capacity,
            low=low,
        )
        if new.total < self.min_points:
            seen = target if state.capacity is None else state.capacity
            if calm:
                # The prior stands (or rises to this load) as a measured capacity.
                return replace(
                    new, capacity=float(f"{min(max(load, seen), self.max_ratio * target):.6g}")
                )
            if served and load > seen:
                return replace(new, capacity=float(f"{min(load, self.max_ratio * target):.6g}"))
            if busy and load < seen:
                return replace(new, capacity=float(f"{max(load, self.min_ratio * target):.6g}"))
            return new
        curve = self._envelope(new)
        current = target if state.capacity is None else state.capacity
        wanted = self._capacity_estimate(new, curve=curve, target=target, slo=slo * self.knee)
        top = curve.points[-1] if curve.points else None
        if self.probe is not None and top is not None and top[1] <= slo * self.knee:
            highest_safe = top[0] + 0.5 * curve.width
            grow = top[1] <= slo * self.grow_below
            wanted = max(current, self.probe * highest_safe) if grow else current
            step = None
            if grow and calm and self.calm_step is not None:
                step = self.calm_step
            if self._served_step(p99=p99, cliff=cliff, load=load, current=current, slo=slo):
                assert self.served_step is not None
                step = max(step or 0.0, self.served_step)
            if step is not None:
                stepped = current * (1.0 + step)
                if self.step_reach is not None:
                    tested = max((x for x, p in curve.points if p <= slo * self.knee), default=0.0)
                    stepped = min(stepped, self.step_reach * tested)
                wanted = max(wanted, stepped)
            if self.extrapolate and len(curve.points) >= 2:
                # The fitted curve's slope from its lightest to its heaviest load,
                # continued to knee x SLO: latency that rises with load (a mix getting
                # heavier, a batch filling up) lowers the capacity before it breaks.
                (x0, p0), (x1, p1) = curve.points[0], top
                if x1 > x0 and p1 > p0:
                    wanted = min(wanted, x1 + (slo * self.knee - p1) * (x1 - x0) / (p1 - p0))
        anchored = self._anchored_bound(new, load=load, bin_p99=p99s[b], slo=slo)
        if anchored is not None:
            wanted = min(wanted, anchored)
        wanted = min(max(wanted, self.min_ratio * target), self.max_ratio * target)
        bounded = min(
            max(wanted, current * (1.0 - self.max_change)), current * (1.0 + self.max_change)
        )
        if (calm or served) and load > bounded:
            bounded = min(load, self.max_ratio * target)
        if busy and load < bounded:
            bounded = max(load, self.min_ratio * target)
        return CapacityState(
            scale=new.scale,
            p99=new.p99,
            n=new.n,
            total=new.total,
            capacity=float(f"{bounded:.6g}"),  # as status stores it: exact round trips
            low=new.low,
            curve=curve,
        )

    def _served_step(
        self, *, p99: float, cliff: float, load: float, current: float, slo: float
    ) -> bool:
        """Whether this sample lets the capacity creep up by `served_step` (the caller
        checked that the heaviest load seen is under the knee)."""
        return (
            self.served_step is not None
            and p99 <= slo * self.served_step_below
            and cliff <= slo * self.served_step_cliff_below
            and load >= self.served_step_load * current
        )

    def _anchored_bound(
        self, state: CapacityState, *, load: float, bin_p99: float | None, slo: float
    ) -> float | None:
        """The capacity `anchored` allows from this sample (None: no bound): the load where
        the line 1 / P99 = 1 / low - k x load, through this load and its bin's P99, reaches
        1 / (`anchored` x SLO). Only for a bin P99 above the served rule (or the calm
        level) and under the knee, and above `low` (at the lightest P99 there is no
        slope)."""
        if self.anchored is None or bin_p99 is None or state.low is None or load <= 0.0:
            return None
        floor = self.served_below if self.served_below is not None else self.grow_below
        if not (slo * floor < bin_p99 < slo * self.knee) or not 0.0 < state.low < bin_p99:
            return None
        x = 1.0 / state.low
        return load * (x - 1.0 / (slo * self.anchored)) / (x - 1.0 / bin_p99)

    def _envelope(self, state: CapacityState) -> LatencyCurve:
        """(bin centre load, monotone P99) for bins with enough points: weighted isotonic
        regression by pool-adjacent-violators (16 bins: cheaper by hand than scipy or
        scikit-learn, neither of which the pure core may pull in per call)."""
        width = self._width(state)
        loads: list[float] = []
        # Blocks of pooled bins: [weighted mean, weight, number of bins].
        blocks: list[list[float]] = []
        for i, (p, n) in enumerate(zip(state.p99, state.n, strict=True)):
            if p is None or n < self.min_bin_points:
                continue
            loads.append((i + 0.5) * width)
            blocks.append([p, float(min(n, self.max_weight)), 1.0])
            while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
                m2, w2, c2 = blocks.pop()
                m1, w1, c1 = blocks.pop()
                blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
        fitted: list[float] = []
        for mean, _, count in blocks:
            fitted.extend([mean] * int(count))
        return LatencyCurve(points=tuple(zip(loads, fitted, strict=True)), width=width)

    def _capacity_estimate(
        self,
        state: CapacityState,
        *,
        curve: LatencyCurve,
        target: float,
        slo: float,
    ) -> float:
        env = curve.points
        prev: tuple[float, float] | None = None
        for load, p in env:
            if p > slo:
                if prev is None:
                    # Already too slow at the lowest load seen: scale that load down.
                    scaled = max(load * slo / p, 0.01 * target)
                    if self.saturated_edge is not None and p >= slo * self.saturated_edge:
                        return max(scaled, load - 0.5 * curve.width)  # the bin's lower edge
                    return scaled
                x0, p0 = prev
                if load - x0 > curve.width * 1.01:
                    return load - 0.5 * curve.width  # across a gap: where the slow bin starts
                if self.hyperbolic_crossing and p0 > 0.0:
                    # 1 / P99 linear between the two bins: p0 <= slo < p.
                    share = (1.0 / slo - 1.0 / p0) / (1.0 / p - 1.0 / p0)
                    return x0 + (load - x0) * share
                return x0 + (load - x0) * (slo - p0) / (p - p0)  # p0 <= slo < p
            prev = (load, p)
        if not env:
            return target
        highest_safe = env[-1][0] + 0.5 * curve.width
        return max(target, min(highest_safe, 2.0 * target))

    def capacity(self, state: CapacityState, *, target: float) -> float:
        """Effective tokens/s per replica at the SLO (the spec's value until learned)."""
        if state.capacity is None or state.scale != target:
            return target
        return state.capacity

    def latency_curve(self, state: CapacityState, *, target: float) -> LatencyCurve:
        """The monotone P99-over-load curve; no points until learned."""
        if state.scale != target:
            return LatencyCurve(points=(), width=target * self.bin_fraction)
        return state.curve if state.curve is not None else self._envelope(state)

    def tested_load(self, state: CapacityState, *, target: float, slo: float) -> float | None:
        """The heaviest load per replica the pods were seen serving with a fitted P99 within
        `knee` x `slo`: the centre of the heaviest such bin of the latency curve, a load
        recent samples showed rather than an estimate extrapolated from them. None: none."""
        tested = None
        for load, p in self.latency_curve(state, target=target).points:
            if p > slo * self.knee:
                break  # the curve is monotone: every heavier bin is over the knee too
            tested = load
        return tested

    def limit_seen(self, state: CapacityState, *, target: float, slo: float) -> bool:
        """Whether the latency curve holds a bin past `knee` x `slo`: a load the pods were
        seen failing at, so the capacity is measured rather than the spec's prior (or a
        step up from the loads served) that no sample has contradicted."""
        return any(p > slo * self.knee for _, p in self.latency_curve(state, target=target).points)

    def to_dict(self, state: CapacityState) -> dict[str, Any]:
        out = {
            "s": state.scale,
            "p": list(state.p99),
            "n": list(state.n),
            "N": state.total,
            "c": state.capacity,
        }
        if state.low is not None:
            out["l"] = state.low
        return out

    def from_dict(self, data: dict[str, Any], *, target: float) -> CapacityState:
        p = data.get("p") or []
        n = data.get("n") or []
        if float(data.get("s", 0.0)) != target or len(p) != self.bins or len(n) != self.bins:
            return self.initial(target=target)
        c = data.get("c")
        low = data.get("l")
        if not _NUMBERS.issuperset(map(type, p)) or not _INTS.issuperset(map(type, n)):
            raise ValueError("capacity bins hold a non-number")
        if type(low) not in _NUMBERS:
            raise ValueError("capacity's lightest P99 is not a number")
        return CapacityState(
            scale=target,
            p99=tuple(p),  # JSON numbers work as they are; no per-bin conversion per call
            n=tuple(n),
            total=int(data.get("N", 0)),
            capacity=None if c is None else float(c),
            low=None if low is None else float(low),
        )
