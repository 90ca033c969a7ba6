"""The Triton pods of a ModelDeployment run with the control APIs locked to its key, and a
change of spec.serving (only that) changes the pod template, so the pods roll."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes_validate
import pytest

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import control, deployment


def md(**spec: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "serving", "uid": "uid-1"},
            "spec": {
                "model": {"name": "m", "repository": "/models", "backend": "python"},
                **spec,
            },
        }
    )


def container(m: ModelDeployment) -> dict[str, Any]:
    result: dict[str, Any] = deployment.build(m, replicas=1)["spec"]["template"]["spec"][
        "containers"
    ][0]
    return result


def test_triton_requires_the_key_for_model_control_on_http_and_grpc() -> None:
    args = container(md())["args"]
    wanted = f"model-repository,logging,trace:{control.HEADER}=$({control.ENV})"
    assert f"--http-restricted-api={wanted}" in args
    assert f"--grpc-restricted-protocol={wanted}" in args


def test_the_key_comes_from_the_secret_and_defined_before_user_env() -> None:
    env = container(md(server={"env": [{"name": control.ENV, "value": "mine"}, {"name": "A"}]}))[
        "env"
    ]
    assert env[0] == {
        "name": control.ENV,
        "valueFrom": {"secretKeyRef": {"name": "llama-triton-control", "key": "key"}},
    }
    assert [e["name"] for e in env] == [control.ENV, "A"]


def test_secret_is_owned_valid_and_round_trips_the_key() -> None:
    key = "0f" * control.KEY_BYTES
    secret = control.build_secret(md(), key=key)
    kubernetes_validate.validate(secret, "1.34", strict=True)
    assert secret["metadata"]["ownerReferences"][0]["name"] == "llama"
    assert control.key_of(secret["data"]) == key


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(None, id="no-data"),
        pytest.param({}, id="empty"),
        pytest.param({"key": "!!!"}, id="not-base64"),
        pytest.param({"key": base64.b64encode(b"short").decode()}, id="short"),
        pytest.param({"key": base64.b64encode(b"Z" * 64).decode()}, id="not-hex"),
    ],
)
def test_a_malformed_secret_yields_no_key(data: dict[str, str] | None) -> None:
    assert control.key_of(data) is None


def test_without_serving_the_pod_template_has_no_policy_hash() -> None:
    annotations = deployment.build(md(), replicas=1)["spec"]["template"]["metadata"]["annotations"]
    assert deployment.SERVING_HASH_ANNOTATION not in annotations


def test_a_policy_change_rolls_the_pods_and_nothing_else_does() -> None:
    def template(**spec: Any) -> dict[str, Any]:
        result: dict[str, Any] = deployment.build(md(**spec), replicas=1)["spec"]["template"]
        return result

    one = template(serving={"queue": {"maxQueueSize": 4}})
    same = template(serving={"queue": {"maxQueueSize": 4}}, minReplicas=2, maxReplicas=4)
    other = template(serving={"queue": {"maxQueueSize": 8}})
    assert one == same
    assert (
        one["metadata"]["annotations"][deployment.SERVING_HASH_ANNOTATION]
        != other["metadata"]["annotations"][deployment.SERVING_HASH_ANNOTATION]
    )
