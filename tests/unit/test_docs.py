"""The user docs name what the code really has: every operator metric, every decision
reason, and nothing that is gone."""

from __future__ import annotations

import pathlib
import re

from prometheus_client import REGISTRY

from modelscale import telemetry  # noqa: F401  (registers the metrics)
from modelscale.autoscaling import recommender

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def exposed_names() -> set[str]:
    """Metric names as Prometheus scrapes them (counters end in _total)."""
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("modelscale_"):
            names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


def test_metrics_doc_lists_exactly_the_operator_metrics() -> None:
    text = (DOCS / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `(modelscale_[a-z_]+)` \|", text, flags=re.M))
    assert documented == exposed_names()


def test_tuning_guide_explains_every_decision_reason() -> None:
    text = (DOCS / "tuning.md").read_text()
    reasons = {
        value
        for name, value in vars(recommender).items()
        if name.isupper() and isinstance(value, str) and re.fullmatch(r"[A-Z][A-Za-z]+", value)
    }
    assert len(reasons) >= 10
    missing = [r for r in sorted(reasons) if f"| `{r}` |" not in text]
    assert missing == [], f"docs/tuning.md does not explain: {missing}"
