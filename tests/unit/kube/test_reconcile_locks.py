"""Reconcile passes of one ModelDeployment never overlap (else both post `ServiceCreated`);
passes of different ModelDeployments do."""

from __future__ import annotations

import threading
import time

import pytest

from modelscale.loops.reconcile import KeyedLocks


@pytest.mark.parametrize(
    ("keys", "overlap"),
    [
        pytest.param((("llm", "a"), ("llm", "a")), False, id="same-modeldeployment"),
        pytest.param((("llm", "a"), ("llm", "b")), True, id="different-names"),
        pytest.param((("x", "a"), ("y", "a")), True, id="different-namespaces"),
    ],
)
def test_passes_overlap_only_across_modeldeployments(
    keys: tuple[tuple[str, str], tuple[str, str]], overlap: bool
) -> None:
    locks = KeyedLocks()
    inside = 0
    most = 0
    count = threading.Lock()
    both_started = threading.Barrier(2)

    def one_pass(key: tuple[str, str]) -> None:
        nonlocal inside, most
        both_started.wait()
        with locks.hold(key):
            with count:
                inside += 1
                most = max(most, inside)
            time.sleep(0.2)
            with count:
                inside -= 1

    threads = [threading.Thread(target=one_pass, args=(k,)) for k in keys]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=5)
    assert most == (2 if overlap else 1)
