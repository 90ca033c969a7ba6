"""`make demo`, short: the whole newcomer path (helm install of the chart, the toy LLM on the
real Triton, a replayed trace through the ready endpoints) runs for 60 s of load and
reports what a user would read: the summary and a real figure.

It lives in tests/integration (collected before e2e/tests) because the demo installs the
helm release itself: e2e/tests' session-wide operator fixture would otherwise hold the
one release per cluster for the rest of the session."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest
from matplotlib import image

pytestmark = pytest.mark.cluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_short_demo_reports_slo_attainment_no_cold_requests_and_a_figure(
    cluster: Any, tmp_path: pathlib.Path
) -> None:
    png, summary_file = tmp_path / "demo-report.png", tmp_path / "summary.json"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "demo", "--duration", "60", "--cleanup",
         "--report", str(png), "--summary-json", str(summary_file)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "e2e")},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    took = time.monotonic() - started
    assert proc.returncode == 0, f"demo failed after {took:.0f} s:\n{proc.stdout}\n{proc.stderr}"
    print(f"\nshort demo: {took:.0f} s\n{proc.stdout}")

    assert "Summary" in proc.stdout and "requests on cold pods: 0" in proc.stdout
    summary = json.loads(summary_file.read_text())
    assert summary["requests"] > 100 and summary["ok"] > 0
    assert summary["cold_requests"] == 0
    assert summary["windows"] >= 5
    assert summary["slo_attainment"] is not None and 0.0 <= summary["slo_attainment"] <= 1.0
    assert summary["replica_seconds"] >= 55  # at least minReplicas=1 for the whole minute
    # The live table printed rows as it went (plain lines: stdout is no terminal here).
    assert proc.stdout.count(" / ") >= 4

    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC
    pixels = image.imread(str(png))
    assert pixels.shape[0] >= 600 and pixels.shape[1] >= 800
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50, "the figure is (nearly) blank"
