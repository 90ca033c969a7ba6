"""The ClusterIP Service in front of the warmed-up Triton pods.

Only Ready pods are endpoints, and a pod is Ready only once warmed up (readiness gate), so
the Service never routes to a cold pod.
"""

from __future__ import annotations

from typing import Any

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import names

# appProtocol lets meshes and gateways pick the right protocol (gRPC needs HTTP/2).
_APP_PROTOCOL = {"http": "http", "grpc": "kubernetes.io/h2c", "metrics": "http"}


def build(md: ModelDeployment) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": names.metadata(md, name=names.service(md)),
        "spec": {
            "type": "ClusterIP",
            "selector": names.selector(md),
            "ports": [
                {
                    "name": port_name,
                    "port": port,
                    "targetPort": port_name,
                    "protocol": "TCP",
                    "appProtocol": _APP_PROTOCOL[port_name],
                }
                for port_name, port in names.PORTS.items()
            ],
        },
    }
