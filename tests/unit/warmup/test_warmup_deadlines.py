"""Every Triton call in a warm-up has a deadline, and a stop is honoured at once: against
a server that accepts the connection and never answers (which a real tritonserver cannot
be made to do; the real one is in tests/integration/test_warmup_triton.py). Without
deadlines such a pod held `run_warmup(timeout_seconds=2)` > 30 s, and 16 of them took
every warm-up slot of the cluster."""

from __future__ import annotations

import threading
import time

import pytest

from harness import faultservers
from modelscale.api.v1alpha1 import WarmUp, WarmUpProtocol
from modelscale.warmup import client, reasons


def settings(protocol: WarmUpProtocol, timeout: float) -> WarmUp:
    return WarmUp(enabled=True, auto_generate=True, protocol=protocol, timeout_seconds=timeout)


@pytest.mark.parametrize("protocol", ["GRPC", "HTTP"])
def test_a_server_that_never_answers_ends_the_warm_up_at_its_timeout(
    protocol: WarmUpProtocol,
) -> None:
    with faultservers.silent() as (host, port):
        target = client.Target(host=host, model="toy", http_port=port, grpc_port=port)
        started = time.monotonic()
        result = client.run_warmup(target=target, settings=settings(protocol, 2.0))
        took = time.monotonic() - started
    assert result.reason == reasons.MODEL_NOT_READY
    assert "not ready after 2 s" in result.message
    assert took < 3.0, f"the warm-up took {took:.2f} s"


@pytest.mark.parametrize("protocol", ["GRPC", "HTTP"])
def test_a_stop_ends_a_warm_up_that_waits_on_a_silent_server(protocol: WarmUpProtocol) -> None:
    stop = threading.Event()
    with faultservers.silent() as (host, port):
        target = client.Target(host=host, model="toy", http_port=port, grpc_port=port)
        threading.Timer(0.5, stop.set).start()
        started = time.monotonic()
        with pytest.raises(client.StoppedError):
            client.run_warmup(target=target, settings=settings(protocol, 60.0), stop=stop)
        took = time.monotonic() - started
    assert took < 0.5 + client.CALL_SECONDS + 0.5, f"the stop took {took:.2f} s to take effect"
