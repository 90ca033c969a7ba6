"""Every spec the CRD accepts builds children the real apiserver accepts (issue 10, item 7).

Hypothesis generates ModelDeployments at the edges (see `harness.spec_strategies`). Each one
goes to the real kube-apiserver as a server-side dry run: either the CRD refuses it with a
message naming the field, and the operator's parser refuses it too; or the CRD takes it, the
operator parses what was stored (defaults filled in), and the Deployment, Service and
PodDisruptionBudget built from it pass the apiserver's own validation and admission
(`kube.apply.dry_run_all`, the check the reconcile pass runs before applying anything).
Nothing is stored, so one namespace serves every example.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from harness import spec_strategies as specs
from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.kube import apply as kube_apply
from modelscale.loops import reconcile

pytestmark = pytest.mark.cluster

MODEL = {"name": "toy_llm", "repository": "/models"}


@pytest.fixture(scope="module")
def ns(installed: None, kube_api: client.ApiClient) -> Iterator[str]:
    core = client.CoreV1Api(kube_api)
    name = f"t-children-{uuid.uuid4().hex[:5]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def _dry_run_create(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        v1alpha1.GROUP,
        v1alpha1.VERSION,
        body["metadata"]["namespace"],
        v1alpha1.PLURAL,
        body,
        dry_run="All",
    )
    return created


def check(api: client.ApiClient, body: dict[str, Any]) -> str:
    """`refused` or `built`; fails the test on any other outcome."""
    try:
        stored = _dry_run_create(api, body)
    except ApiException as err:
        assert err.status == 422, f"CRD refused with {err.status}: {err.body}"
        why = kube_apply.apiserver_message(err)
        # The field's path, or (a rule on the whole object) the field in the message.
        named = re.search(r" is invalid: \[?spec", why) or "metadata.name must" in why
        assert named, f"the refusal names no field: {why}"
        # The operator's parser agrees: nothing it would accept is lost at apply time.
        with pytest.raises(ValidationError):
            ModelDeployment.model_validate(body)
        return "refused"
    try:
        md = ModelDeployment.model_validate(stored)
    except ValidationError as err:
        pytest.fail(f"the CRD stored a spec the operator cannot parse: {err}\n{body}")
    md = md.model_copy(
        update={"metadata": md.metadata.model_copy(update={"uid": str(uuid.uuid4())})}
    )
    try:
        kube_apply.dry_run_all(api, reconcile.children(md, replicas_=md.spec.min_replicas))
    except kube_apply.ChildRefusedError as err:
        pytest.fail(
            f"the CRD accepted a spec whose {err.kind} the apiserver refuses: {err}\n{body}"
        )
    return "built"


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(name=specs.names, spec=specs.specs())
@example(name="llama-3.1-8b", spec={"model": MODEL})
@example(name="7b-chat", spec={"model": MODEL})
@example(name="x" * 64, spec={"model": MODEL})
@example(name="a" * 63, spec={"model": MODEL})
@example(
    name="dshm",
    spec={
        "model": MODEL,
        "server": {
            "podTemplate": {"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
        },
    },
)
@example(
    name="both",
    spec={
        "model": MODEL,
        "server": {
            "env": [
                {
                    "name": "T",
                    "value": "x",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                }
            ]
        },
    },
)
def test_every_accepted_spec_builds_children_the_apiserver_accepts(
    kube_api: client.ApiClient, ns: str, name: str, spec: dict[str, Any]
) -> None:
    # `pytest --hypothesis-show-statistics` shows how many were refused and how many built.
    event(check(kube_api, specs.modeldeployment(name, ns, spec)))


@pytest.mark.parametrize(
    ("name", "service"),
    [
        pytest.param("llama", "llama", id="dns-label-kept"),
        pytest.param("llama-3.1-8b", "llama-3-1-8b-", id="dots"),
        pytest.param("7b-chat", "md-7b-chat-", id="leading-digit"),
    ],
)
def test_service_names_are_dns_labels_users_can_find(
    kube_api: client.ApiClient, ns: str, name: str, service: str
) -> None:
    md = ModelDeployment.model_validate(
        _dry_run_create(kube_api, specs.modeldeployment(name, ns, {"model": MODEL}))
    )
    built = reconcile.children(md, replicas_=1)
    assert [c["kind"] for c in built] == ["Deployment", "Service", "PodDisruptionBudget"]
    assert built[0]["metadata"]["name"] == name  # pods and the PDB keep the user's name
    assert built[1]["metadata"]["name"].startswith(service)
    kube_apply.dry_run_all(kube_api, built)


def test_names_longer_than_a_label_value_are_refused_with_the_reason(
    kube_api: client.ApiClient, ns: str
) -> None:
    with pytest.raises(ApiException) as err:
        _dry_run_create(kube_api, specs.modeldeployment("m" * 64, ns, {"model": MODEL}))
    assert v1alpha1.MSG_NAME_LENGTH in kube_apply.apiserver_message(err.value)


def test_a_refused_child_leaves_nothing_applied(kube_api: client.ApiClient, ns: str) -> None:
    """All or none: the Service is refused, so the Deployment (GPU pods) is not made either,
    and the error names the child and the apiserver's reason."""
    md = ModelDeployment.model_validate(
        {
            "metadata": {"name": "half", "namespace": ns, "uid": str(uuid.uuid4())},
            "spec": {"model": MODEL},
        }
    )
    # No replicas: the pod runtime would start real Triton processes for this check.
    deployment, service, pdb = reconcile.children(md, replicas_=0)
    service["spec"]["ports"][0]["port"] = 70000  # what no spec can produce: failure injection
    with pytest.raises(kube_apply.ChildRefusedError) as err:
        kube_apply.apply_all(kube_api, [deployment, service, pdb])
    assert (err.value.kind, err.value.name) == ("Service", "half")
    assert "port" in err.value.reason
    apps = client.AppsV1Api(kube_api)
    with pytest.raises(ApiException) as missing:
        apps.read_namespaced_deployment("half", ns)
    assert missing.value.status == 404
    # ... and with the Service fixed, all three are created.
    service["spec"]["ports"][0]["port"] = 8000
    outcomes = kube_apply.apply_all(kube_api, [deployment, service, pdb])
    assert [o.outcome for o in outcomes] == [kube_apply.Outcome.CREATED] * 3
    again = kube_apply.apply_all(kube_api, [deployment, service, pdb])
    assert [o.outcome for o in again] == [kube_apply.Outcome.UNCHANGED] * 3
