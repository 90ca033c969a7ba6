"""Token-rate series from the shared traces, built the way bench/forecast_mape.py does."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
# The copies the repo carries (with their attribution), so a clone alone runs the tests.
TRACES = REPO / "bench" / "traces"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "forecast_mape", REPO / "bench" / "forecast_mape.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def bench() -> ModuleType:
    """bench/forecast_mape.py: its series builders and online MAPE."""
    assert TRACES.is_dir(), f"benchmark traces missing at {TRACES}"
    return _bench()
