"""What a scaling policy may observe of a replay (`View`, `PodMetric`), and the metric
windows it observes them over. Split out of engine.py; behaviour unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from modelscale.simulate.state import EngineState

SCRAPE_INTERVAL_S = 15.0  # Prometheus scrape interval (default; 30 s is also common)
RATE_WINDOW_S = 60.0  # rate(...[1m]) / histogram_quantile over 1 m
MAX_METRIC_WINDOW_S = 900.0  # the longest window a View method looks back over


class PodMetric(NamedTuple):
    """A per-pod gauge as the newest scrape saw it, one value per scraped pod (pods whose
    container is ready; in pod-creation order)."""

    per_pod: tuple[float, ...]

    @property
    def total(self) -> float:
        return float(sum(self.per_pod))

    @property
    def mean(self) -> float:
        return self.total / len(self.per_pod) if self.per_pod else 0.0

    @property
    def max(self) -> float:
        return max(self.per_pod) if self.per_pod else 0.0


class View:
    """What a policy may look at. Metric methods return what Prometheus would answer at
    `now`: the newest scrape (`sample_time`, up to one scrape interval old) and rate() /
    quantiles over a window ending there. Exceptions, as their real sources are: `created`,
    `container_ready`, `warmed` (the Kubernetes API) and `concurrency` (Knative's
    queue-proxies report each second)."""

    def __init__(self, engine: EngineState, now: float) -> None:
        self._e = engine
        self.now = now

    @property
    def created(self) -> int:
        """Replicas that exist and are not terminating (Deployment status.replicas)."""
        return int(self._e.alive_ids().size)

    @property
    def container_ready(self) -> int:
        """Replicas whose container passed its readiness probe (warm or not)."""
        e = self._e
        ids = e.alive_ids()
        return int(np.count_nonzero(e.ready_at[ids] <= self.now))

    @property
    def warmed(self) -> int:
        e = self._e
        ids = e.alive_ids()
        return int(np.count_nonzero(e.warm_at[ids] <= self.now))

    @property
    def sample_time(self) -> float:
        """Time of the newest scrape (0 before the first)."""
        return self._e.scrape_t[-1] if self._e.scrape_t else 0.0

    @property
    def queue_depth(self) -> int:
        """Requests waiting in the pods' queues at the newest scrape."""
        return round(self.waiting_requests().total)

    def running_requests(self) -> PodMetric:
        """Requests each pod is serving (prefilling or decoding), as vLLM's
        `num_requests_running` gauge shows at the newest scrape."""
        return PodMetric(self._e.gauge_running)

    def waiting_requests(self) -> PodMetric:
        """Requests queued in each pod (admission waits for KV cache or a batch slot), as
        vLLM's `num_requests_waiting` gauge shows at the newest scrape."""
        return PodMetric(self._e.gauge_waiting)

    def kv_cache_usage(self) -> PodMetric:
        """Fraction (0..1) of each pod's KV cache holding context tokens, as vLLM's
        `kv_cache_usage_perc` gauge shows at the newest scrape."""
        return PodMetric(self._e.gauge_kv)

    def observed_horizon(self) -> float | None:
        """Median creation -> warm seconds of the replicas created during the replay that
        have become warm by now (what the operator measures from its pods' conditions);
        None until one has."""
        e = self._e
        ids = np.arange(e.n_ids)
        done = ids[(~e.initial[: e.n_ids]) & (e.warm_at[: e.n_ids] <= self.now)]
        if done.size == 0:
            return None
        return float(np.median(e.warm_at[done] - e.created_at[done]))

    def _check(self, window_s: float) -> None:
        if not 0 < window_s <= MAX_METRIC_WINDOW_S:
            raise ValueError(
                f"metric window must be in (0, {MAX_METRIC_WINDOW_S:g}] s, got {window_s:g}"
            )

    def _rate(self, counter: list[float], window_s: float) -> float:
        self._check(window_s)
        e = self._e
        if not e.scrape_t:
            return 0.0
        s = e.scrape_t[-1]
        a = max(0.0, s - window_s)
        if s <= a:
            return 0.0
        return (counter[-1] - e.counter_at(counter, a)) / (s - a)

    def token_rate(self, *, window_s: float = RATE_WINDOW_S) -> float:
        """Output tokens/s over the window ending at the newest scrape."""
        return self._rate(self._e.scrape_out, window_s)

    def prompt_token_rate(self, *, window_s: float = RATE_WINDOW_S) -> float:
        """Prompt tokens/s over the window ending at the newest scrape, as
        rate(vllm:prompt_tokens_total[1m]) shows it: a prompt counts when its prefill ends."""
        return self._rate(self._e.scrape_in, window_s)

    def request_rate(self, *, window_s: float = RATE_WINDOW_S) -> float:
        """Requests/s whose first token fell in the window ending at the newest scrape, as
        rate(..._count[1m]) of a latency histogram shows it."""
        self._check(window_s)
        if not self._e.scrape_t:
            return 0.0
        s = self._e.scrape_t[-1]
        n = sum(
            int(np.count_nonzero((at > s - window_s) & (at <= s)))
            for hi, at, _ in self._e.ev_ttft
            if hi > s - window_s
        )
        return n / min(window_s, s) if s > 0 else 0.0

    def p99(self, *, signal: str = "ttft", window_s: float = RATE_WINDOW_S) -> float | None:
        """P99 of TTFT ("ttft") or TPOT ("tpot") of requests whose first token (TTFT) or
        last token (TPOT) fell in the window ending at the newest scrape."""
        if signal not in ("ttft", "tpot"):
            raise ValueError(f"signal must be 'ttft' or 'tpot', got {signal!r}")
        self._check(window_s)
        if not self._e.scrape_t:
            return None
        s = self._e.scrape_t[-1]
        events = self._e.ev_ttft if signal == "ttft" else self._e.ev_tpot
        parts = [v[(at > s - window_s) & (at <= s)] for hi, at, v in events if hi > s - window_s]
        sel = np.concatenate(parts) if parts else np.zeros(0)
        if sel.size == 0:
            return None
        return float(np.quantile(sel, 0.99))

    def concurrency(self, *, window_s: float) -> float:
        """Mean in-flight requests (running plus queued) over the last `window_s`."""
        self._check(window_s)
        e = self._e
        k1 = e.tick - 1
        if k1 < 0:
            return 0.0
        n = min(k1 + 1, max(1, round(window_s / e.dt)))
        idx = np.arange(k1 - n + 1, k1 + 1) % e.conc.size
        return float(e.conc[idx].mean())
