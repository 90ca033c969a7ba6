"""A deleted ModelDeployment's series leave /metrics; other ModelDeployments' stay."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest

from modelscale import telemetry


def _series_of(namespace: str, name: str) -> list[str]:
    text = generate_latest(REGISTRY).decode()
    needle = f'modeldeployment="{name}"'
    return [
        line
        for line in text.splitlines()
        if needle in line and f'namespace="{namespace}"' in line and not line.startswith("#")
    ]


def test_forget_removes_every_series_of_one_modeldeployment() -> None:
    for name in ("gone", "kept"):
        telemetry.DESIRED.labels("t-forget", name).set(3)
        telemetry.SCALE_EVENTS.labels("t-forget", name, "up").inc()
        telemetry.WARMUPS.labels("t-forget", name, "WarmedUp").inc()
        telemetry.SECONDS_TO_WARM.labels("t-forget", name).observe(12.0)
    assert _series_of("t-forget", "gone")
    removed = telemetry.forget(namespace="t-forget", name="gone")
    assert removed == 4
    assert _series_of("t-forget", "gone") == []
    assert len([s for s in _series_of("t-forget", "kept") if "_bucket" not in s]) >= 4
    assert telemetry.forget(namespace="t-forget", name="gone") == 0
