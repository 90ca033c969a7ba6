"""What `modelscale` prints: `--version`, and `recommend`'s one wording per mode."""

from __future__ import annotations

import importlib.metadata

import pytest

from modelscale import cli
from modelscale.commands.recommend import render_text


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"modelscale {importlib.metadata.version('modelscale')}\n"


@pytest.mark.parametrize(
    ("mode", "current", "recommended", "headline"),
    [
        ("RecommendOnly", 2, 4, "a/b: recommends 4 replicas (now 2); RecommendOnly: not acting"),
        ("RecommendOnly", 2, 2, "a/b: recommends 2 replicas (now 2); RecommendOnly: not acting"),
        ("External", 3, 1, "a/b: recommends 1 replica (now 3); External: not acting"),
        ("Predictive", 2, 4, "a/b (Predictive): scales 2 → 4 replicas"),
        ("Predictive", 2, 2, "a/b (Predictive): keeps 2 replicas"),
    ],
)  # fmt: skip
def test_recommend_wording(mode: str, current: int, recommended: int, headline: str) -> None:
    lines = render_text(
        target="a/b",
        mode=mode,
        current=current,
        recommended=recommended,
        reason="ForecastUp: load rises",
        token_rate=1234.56789,
        p99_seconds=0.4567891,
        slo_seconds=2.0,
        slo_signal="TimeToFirstToken",
        warmed=current,
        forecast_token_rate=2000.04,
        forecast_p99_seconds=1.23456,
        horizon_seconds=95.4,
    )
    assert lines[0] == headline
    assert "would" not in " ".join(lines)
    # Rounded numbers and the SLO next to the P99 it is compared with.
    assert lines[2] == (
        "  now:      1234.6 tok/s, P99 0.457 s (SLO 2 s TimeToFirstToken), "
        f"{current} warmed of {current}"
    )
    assert lines[3] == "  forecast: 2000.0 tok/s in 95 s, P99 1.235 s"


def test_recommend_without_data_says_so() -> None:
    lines = render_text(
        target="a/b", mode="Predictive", current=1, recommended=1, reason="Hold: no data",
        token_rate=None, p99_seconds=None, slo_seconds=0.5, slo_signal="EndToEnd", warmed=0,
        forecast_token_rate=None, forecast_p99_seconds=None, horizon_seconds=None,
    )  # fmt: skip
    assert lines[2] == "  now:      no data, P99 no data (SLO 0.5 s EndToEnd), 0 warmed of 1"
    assert len(lines) == 3


def test_recommend_without_kubeconfig_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert cli.main(["recommend", "llm/llama"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (
        err.startswith("modelscale recommend: no Kubernetes configuration") and "KUBECONFIG" in err
    )
