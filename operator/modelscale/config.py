"""The operator's settings from its command line: one typed, immutable object, built once
by `modelscale run` and handed to the loops (through kopf's `memo`), never a global."""

from __future__ import annotations

from dataclasses import dataclass, field

from modelscale.metrics import connection

DEFAULT_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"


def _default_access() -> connection.Access:
    return connection.access(default_url=DEFAULT_PROMETHEUS_URL)


@dataclass(frozen=True)
class OperatorConfig:
    prometheus_url: str = DEFAULT_PROMETHEUS_URL
    """Prometheus that scrapes the Triton pods, unless a ModelDeployment names its own."""
    autoscale_interval: float = 15.0
    """Seconds between scaling passes."""
    resync_interval: float = 60.0
    """Seconds between full reconciles of every ModelDeployment."""
    namespaces: tuple[str, ...] = ()
    """Namespaces watched; empty: all of them."""
    prometheus_access: connection.Access = field(default_factory=_default_access)
    """Which Prometheus URLs a spec may name, and the operator's credentials."""
    allow_privileged_pods: bool = False
    """Let ModelDeployments run pods beyond Pod Security `restricted` (`podsecurity`)."""

    @property
    def namespace_list(self) -> list[str] | None:
        """The namespaces as list-call arguments take them: None for all."""
        return list(self.namespaces) or None
