"""The serving policy of the replica model: priority classes, each with a per-pod queue
limit and a queue timeout, and priority-ordered admission — what Triton's dynamic batcher
does with `priority_levels` and a per-level `queue_policy` whose `timeout_action` is
REJECT (docs/replica-model.md, "Serving policy").

A request carries a class: its trace's `priority` column where the trace has one (1 =
the first, highest class, as Triton numbers its levels), else one drawn from the classes'
`share`s with the policy's seed. A request that would be queued in a pod behind
`max_queue` requests of its class, or that has waited `timeout_s` without being
admitted, is shed at once (refused with a reason the client sees) and counted. With
`ordered`, each pod admits its queue in class order (oldest first within a class);
without it, oldest first whatever the class (the classes only label the requests, for
comparing the same load with and without the policy). Pure: no clock, no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
MAX_CLASSES = 8


class ServingPolicyError(ValueError):
    """A serving policy that cannot be simulated; the message says what to fix."""


@dataclass(frozen=True)
class PriorityClass:
    name: str
    share: float  # of the requests whose trace has no priority column
    max_queue: int | None = None  # per pod, requests of this class waiting (None: no limit)
    timeout_s: float | None = None  # longest wait for admission (None: no timeout)

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in ",= "):
            raise ServingPolicyError(f"class name {self.name!r}: use letters, digits, - or _")
        if not (self.share >= 0 and math.isfinite(self.share)):
            raise ServingPolicyError(f"class {self.name}: share must be >= 0, got {self.share}")
        if self.max_queue is not None and self.max_queue < 0:
            raise ServingPolicyError(
                f"class {self.name}: max queue must be >= 0, got {self.max_queue}"
            )
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ServingPolicyError(
                f"class {self.name}: queue timeout must be > 0 s, got {self.timeout_s}"
            )


@dataclass(frozen=True)
class ServingPolicy:
    classes: tuple[PriorityClass, ...]  # highest priority first
    ordered: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        names = [c.name for c in self.classes]
        if not 1 <= len(names) <= MAX_CLASSES:
            raise ServingPolicyError(f"give 1 to {MAX_CLASSES} priority classes, got {len(names)}")
        if len(set(names)) != len(names):
            raise ServingPolicyError(f"priority class names repeat: {', '.join(names)}")
        if sum(c.share for c in self.classes) <= 0:
            raise ServingPolicyError("the priority split's shares must add up to more than 0")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.classes)

    def max_queue(self) -> I64 | None:
        """Per class, the queue limit (a huge number where there is none); None if no class
        has one."""
        if all(c.max_queue is None for c in self.classes):
            return None
        big = np.iinfo(np.int64).max
        return np.array([big if c.max_queue is None else c.max_queue for c in self.classes])

    def timeouts(self) -> F64 | None:
        """Per class, the queue timeout in seconds (inf where there is none); None if no
        class has one."""
        if all(c.timeout_s is None for c in self.classes):
            return None
        return np.array([math.inf if c.timeout_s is None else c.timeout_s for c in self.classes])

    def draw(self, rng: np.random.Generator, n: int) -> I64:
        """Class indices of `n` requests without a class, drawn from the shares."""
        shares = np.array([c.share for c in self.classes])
        cum = np.cumsum(shares / shares.sum())
        out: I64 = np.minimum(
            np.searchsorted(cum, rng.random(n), side="right"), len(self.classes) - 1
        ).astype(np.int64)
        return out

    def from_levels(self, levels: I64) -> I64:
        """Class indices of a trace's `priority` levels (1 = the first class)."""
        if levels.size and (int(levels.min()) < 1 or int(levels.max()) > len(self.classes)):
            raise ServingPolicyError(
                f"the trace's priority levels span {int(levels.min())}..{int(levels.max())} but "
                f"the priority split names {len(self.classes)} classes "
                f"({', '.join(self.names)}): name one class per level, highest first"
            )
        out: I64 = (levels - 1).astype(np.int64)
        return out


def parse_pairs(text: str, *, flag: str) -> dict[str, float]:
    """`a=0.5,b=0.5` -> {"a": 0.5, "b": 0.5}; a one-line error names the flag otherwise."""
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not name or math.isnan(number):
            raise ServingPolicyError(
                f"{flag} {text!r}: expected CLASS=NUMBER[,CLASS=NUMBER...], e.g. "
                "interactive=0.5,batch=0.5"
            )
        if name in out:
            raise ServingPolicyError(f"{flag}: class {name} given twice")
        out[name] = number
    return out


def from_flags(
    *, split: str, max_queue: str | None, timeout: str | None, ordered: bool = True, seed: int = 0
) -> ServingPolicy:
    """The policy of `--priority-split`, `--max-queue` and `--queue-timeout` (classes in the
    split's order, highest priority first)."""
    shares = parse_pairs(split, flag="--priority-split")
    limits = parse_pairs(max_queue, flag="--max-queue") if max_queue else {}
    timeouts = parse_pairs(timeout, flag="--queue-timeout") if timeout else {}
    for flag, given in (("--max-queue", limits), ("--queue-timeout", timeouts)):
        if unknown := sorted(set(given) - set(shares)):
            raise ServingPolicyError(
                f"{flag} names {', '.join(unknown)}, not a class of --priority-split "
                f"({', '.join(shares)})"
            )
    for name, limit in limits.items():
        if limit != int(limit):
            raise ServingPolicyError(f"--max-queue {name}={limit:g}: a whole number of requests")
    return ServingPolicy(
        classes=tuple(
            PriorityClass(
                name=name,
                share=share,
                max_queue=int(limits[name]) if name in limits else None,
                timeout_s=timeouts.get(name),
            )
            for name, share in shares.items()
        ),
        ordered=ordered,
        seed=seed,
    )


@dataclass(frozen=True)
class ClassStats:
    """One class over a run. `attainment`: share of its requests that met both targets
    (shed ones did not); `p99_ttft_s` over all of them (shed = inf, NaN without requests);
    `max_wait_to_shed_s`: the longest a shed request waited before it was refused."""

    name: str
    requests: int
    ok: int
    shed_queue_full: int
    shed_timeout: int
    p99_ttft_s: float
    max_wait_to_shed_s: float

    @property
    def shed(self) -> int:
        return self.shed_queue_full + self.shed_timeout

    @property
    def attainment(self) -> float | None:
        return self.ok / self.requests if self.requests else None

    def to_dict(self) -> dict[str, float | int | None]:
        def r4(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else round(x, 4)

        return {
            "requests": self.requests,
            "slo_attainment_requests": r4(self.attainment),
            "shed": self.shed,
            "shed_queue_full": self.shed_queue_full,
            "shed_timeout": self.shed_timeout,
            "shed_share": r4(self.shed / self.requests) if self.requests else None,
            "p99_ttft_s": r4(self.p99_ttft_s) if math.isfinite(self.p99_ttft_s) else None,
            "p99_ttft_is_inf": bool(self.requests) and math.isinf(self.p99_ttft_s),
            "max_wait_to_shed_s": r4(self.max_wait_to_shed_s) if self.shed else None,
        }


class ClassTally:
    """Per-class records while a replay runs (finished, failed and shed requests)."""

    def __init__(self, policy: ServingPolicy) -> None:
        self.policy = policy
        n = len(policy.classes)
        self.ok = np.zeros(n, dtype=np.int64)
        self.shed_full = np.zeros(n, dtype=np.int64)
        self.shed_timeout = np.zeros(n, dtype=np.int64)
        self.max_wait = np.zeros(n)
        self._ttft: list[tuple[I64, F64]] = []

    def finished(self, prio: I64, ttft: F64, ok: NDArray[np.bool_]) -> None:
        self._ttft.append((prio, ttft))
        self.ok += np.bincount(prio, weights=ok, minlength=self.ok.size).astype(np.int64)

    def shed(self, prio: I64, waited: F64, *, timeout: bool) -> None:
        into = self.shed_timeout if timeout else self.shed_full
        into += np.bincount(prio, minlength=into.size)
        np.maximum.at(self.max_wait, prio, waited)

    def stats(self) -> tuple[ClassStats, ...]:
        prio = np.concatenate([p for p, _ in self._ttft]) if self._ttft else np.zeros(0, np.int64)
        ttft = np.concatenate([t for _, t in self._ttft]) if self._ttft else np.zeros(0)
        out = []
        for k, c in enumerate(self.policy.classes):
            mine = ttft[prio == k]
            out.append(
                ClassStats(
                    name=c.name,
                    requests=int(mine.size),
                    ok=int(self.ok[k]),
                    shed_queue_full=int(self.shed_full[k]),
                    shed_timeout=int(self.shed_timeout[k]),
                    p99_ttft_s=(
                        float(np.percentile(mine, 99, method="higher")) if mine.size else math.nan
                    ),
                    max_wait_to_shed_s=float(self.max_wait[k]),
                )
            )
        return tuple(out)
