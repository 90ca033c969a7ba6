"""Process-wide operator settings given on the command line (set once at start)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Settings:
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    autoscale_interval: float = 15.0
    resync_interval: float = 60.0
    namespaces: tuple[str, ...] = ()  # empty: all namespaces


current = Settings()


def configure(
    *,
    prometheus_url: str,
    autoscale_interval: float,
    resync_interval: float,
    namespaces: tuple[str, ...] = (),
) -> None:
    current.namespaces = namespaces
    current.prometheus_url = prometheus_url
    current.autoscale_interval = autoscale_interval
    current.resync_interval = resync_interval
