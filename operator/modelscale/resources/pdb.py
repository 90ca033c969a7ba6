"""The PodDisruptionBudget: node drains take down at most `disruption.maxUnavailable`."""

from __future__ import annotations

from typing import Any

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import names


def build(md: ModelDeployment) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": names.metadata(md, name=names.pdb(md)),
        "spec": {
            "maxUnavailable": md.spec.disruption.max_unavailable,
            "selector": {"matchLabels": names.selector(md)},
            # A pod that never became Ready (stuck loading or failing warm-up) serves nobody;
            # without this it would block every node drain.
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
