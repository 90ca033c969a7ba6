"""Names, labels and owner references shared by every child of a ModelDeployment.

Naming: the Deployment, the Service and the PodDisruptionBudget of ModelDeployment NAME are
all called NAME (one of each kind per ModelDeployment, so no suffix is needed, and the
Service name is the DNS name users expect: NAME.NAMESPACE.svc). Pods are NAME-<hash>-<id>.

A ModelDeployment name is a DNS-1123 subdomain (dots, a leading digit: `llama-3.1-8b`,
`7b-chat`), a Service name must be a DNS-1035 label (letters, digits and `-`, starting with a
letter). Such a name gets a Service named from it with the dots made dashes, a leading
`md-` before a digit, and a hash of the whole name (`llama-3-1-8b-7b633509`), so two
ModelDeployments never share a Service. Names longer than 63 characters are refused by the
CRD (`MAX_NAME_LENGTH`): the name is the value of the pod label that ties pods to their
ModelDeployment, and label values stop at 63.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_MODELDEPLOYMENT = "modelscale.dev/modeldeployment"

APP_NAME = "modelscale-triton"
MANAGED_BY = "modelscale"

# Triton's ports, named as the Service, probes and Prometheus scrape configs refer to them.
PORTS: dict[str, int] = {"http": 8000, "grpc": 8001, "metrics": 8002}

SCRAPE_ANNOTATIONS: dict[str, str] = {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": str(PORTS["metrics"]),
    "prometheus.io/path": "/metrics",
}


def deployment(md: ModelDeployment) -> str:
    return md.name


# A DNS-1035 label (Service names): what `validation.IsDNS1035Label` accepts.
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL_MAX = 63
_HASH_CHARS = 8


def dns1035_label(name: str) -> str:
    """`name` when it already is a DNS-1035 label, else a DNS-1035 label derived from it
    with a hash of `name` at the end (distinct names give distinct labels)."""
    if len(name) <= _DNS_LABEL_MAX and _DNS1035.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    base = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    if not base[:1].isalpha():
        base = f"md-{base}"
    base = base[: _DNS_LABEL_MAX - _HASH_CHARS - 1].strip("-")
    return f"{base}-{digest}"


def service(md: ModelDeployment) -> str:
    """The Service's name: NAME when NAME is a DNS-1035 label, else derived (see above)."""
    return dns1035_label(md.name)


def pdb(md: ModelDeployment) -> str:
    return md.name


def selector(md: ModelDeployment) -> dict[str, str]:
    """Selects the pods of this ModelDeployment (and nothing else: one label, immutable)."""
    return {LABEL_MODELDEPLOYMENT: md.name}


def selector_string(md: ModelDeployment) -> str:
    """The selector as `status.selector` (read by the `/scale` subresource, HPA, KEDA)."""
    return ",".join(f"{key}={value}" for key, value in sorted(selector(md).items()))


def labels(md: ModelDeployment) -> dict[str, str]:
    """Labels on every child object and pod."""
    return {
        LABEL_NAME: APP_NAME,
        LABEL_INSTANCE: md.name,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_MODELDEPLOYMENT: md.name,
    }


def owner(md: ModelDeployment) -> dict[str, Any]:
    """Owner reference: deleting the ModelDeployment garbage-collects the child."""
    return {
        "apiVersion": v1alpha1.API_VERSION,
        "kind": v1alpha1.KIND,
        "name": md.name,
        "uid": md.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(md: ModelDeployment, *, name: str) -> dict[str, Any]:
    """Metadata of a child object."""
    return {
        "name": name,
        "namespace": md.namespace,
        "labels": labels(md),
        "ownerReferences": [owner(md)],
    }
