"""The pure warm-up: inputs, verdicts, retries, the gate, scale-down order, start-up figures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeploymentSpec, WarmUp, WarmUpSuccess
from modelscale.warmup import gate, inputs, pod_annotations, reasons, startup, verdict

VLLM_METADATA = {
    "name": "llm",
    "versions": ["1"],
    "platform": "vllm",
    "inputs": [
        {"name": "text_input", "datatype": "BYTES", "shape": [1]},
        {"name": "stream", "datatype": "BOOL", "shape": [1]},
        {"name": "sampling_parameters", "datatype": "BYTES", "shape": [1]},
        {"name": "exclude_input_in_output", "datatype": "BOOL", "shape": [1]},
        {"name": "lora_name", "datatype": "BYTES", "shape": [1]},
    ],
    "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}],
}
VLLM_CONFIG = {
    "name": "llm",
    "model_transaction_policy": {"decoupled": True},
    "input": [
        {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
        {"name": "stream", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
        {"name": "sampling_parameters", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
        {
            "name": "exclude_input_in_output",
            "data_type": "TYPE_BOOL",
            "dims": [1],
            "optional": True,
        },
        {"name": "lora_name", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    ],
}
# gRPC's get_model_metadata(as_json=True) renders int64 dims as strings.
NUMERIC_METADATA_GRPC = {
    "name": "resnet",
    "inputs": [
        {"name": "INPUT__0", "datatype": "FP32", "shape": ["-1", "3", "4", "4"]},
        {"name": "ids", "datatype": "INT64", "shape": ["2", "-1"]},
    ],
}


def tensors_by_name(templates: tuple[inputs.RequestTemplate, ...]) -> dict[str, inputs.Tensor]:
    assert len(templates) == 1
    return {t.name: t for t in templates[0].tensors}


def test_vllm_metadata_generates_prompt_sampling_and_no_stream() -> None:
    declared = inputs.model_inputs(VLLM_METADATA, VLLM_CONFIG)
    tensors = tensors_by_name(inputs.plan_requests(settings=WarmUp(), inputs=declared))
    # lora_name is optional and unknown: a prompt in it would fail every request.
    assert set(tensors) == {
        "text_input",
        "stream",
        "sampling_parameters",
        "exclude_input_in_output",
    }
    assert tensors["text_input"].values == (inputs.DEFAULT_PROMPT.encode(),)
    assert tensors["stream"].values == (False,)
    params = json.loads(tensors["sampling_parameters"].values[0])
    assert 0 < params["max_tokens"] <= 16
    assert all(t.shape == (1,) for t in tensors.values())
    assert inputs.is_decoupled(VLLM_CONFIG)


def test_numeric_model_gets_ones_of_declared_shape_with_variable_dims_as_one() -> None:
    declared = inputs.model_inputs(NUMERIC_METADATA_GRPC)
    tensors = tensors_by_name(inputs.plan_requests(settings=WarmUp(), inputs=declared))
    assert tensors["INPUT__0"].shape == (1, 3, 4, 4)
    assert tensors["INPUT__0"].values == (1.0,) * 48
    assert tensors["ids"].shape == (2, 1)
    assert tensors["ids"].values == (1, 1)
    assert not inputs.is_decoupled({"config": {"max_batch_size": 8}})


@pytest.mark.parametrize(
    ("metadata_input", "expected"),
    [
        pytest.param(
            {"name": "max_tokens", "datatype": "INT32", "shape": [1]}, (8,), id="token-count"
        ),
        pytest.param({"name": "x", "datatype": "FP16", "shape": [2]}, (1.0, 1.0), id="fp16"),
        pytest.param({"name": "flag", "datatype": "BOOL", "shape": [-1]}, (False,), id="bool"),
        pytest.param(
            {"name": "prompt", "datatype": "BYTES", "shape": [-1, 1]},
            (inputs.DEFAULT_PROMPT.encode(),),
            id="batched-bytes",
        ),
    ],
)
def test_generated_values(metadata_input: dict[str, Any], expected: tuple[Any, ...]) -> None:
    (inp,) = inputs.model_inputs({"inputs": [metadata_input]})
    assert inputs.generate_tensor(inp).values == expected


def bytes_input(*values: Any) -> dict[str, Any]:
    return {"datatype": "BYTES", "shape": [len(values)], "data": list(values)}


def test_explicit_requests_use_metadata_types_and_fill_missing_inputs() -> None:
    settings = WarmUp.model_validate(
        {
            "requests": [
                {
                    "inputs": {
                        "text_input": bytes_input("hello"),
                        "sampling_parameters": bytes_input({"max_tokens": 4}),
                    }
                },
                {"inputs": {"text_input": bytes_input("bye")}},
            ],
            "autoGenerate": True,
        }
    )
    templates = inputs.plan_requests(
        settings=settings, inputs=inputs.model_inputs(VLLM_METADATA, VLLM_CONFIG)
    )
    first = {t.name: t for t in templates[0].tensors}
    assert first["text_input"].values == (b"hello",)
    assert json.loads(first["sampling_parameters"].values[0]) == {"max_tokens": 4}
    assert first["stream"].values == (False,)
    second = {t.name: t for t in templates[1].tensors}
    assert second["text_input"].values == (b"bye",)
    assert "sampling_parameters" in second


@pytest.mark.parametrize(
    ("requests", "auto_generate", "message"),
    [
        pytest.param(
            [{"inputs": {"nope": bytes_input("x")}}],
            True,
            "does not have: nope",
            id="unknown-input",
        ),
        pytest.param(
            [{"inputs": {"stream": {"datatype": "BOOL", "shape": [1], "data": [False]}}}],
            False,
            "lacks required inputs: text_input",
            id="missing-required",
        ),
        pytest.param(
            [{"inputs": {"text_input": {"datatype": "FP32", "shape": [1], "data": [1.0]}}}],
            True,
            "is BYTES in the model",
            id="wrong-type",
        ),
        pytest.param(
            [{"inputs": {"text_input": {"datatype": "BYTES", "shape": [2], "data": ["x"]}}}],
            True,
            "shape \\[2\\] needs 2 values, got 1",
            id="shape-and-data-disagree",
        ),
    ],
)
def test_bad_explicit_requests_are_plan_errors(
    requests: list[Any], auto_generate: bool, message: str
) -> None:
    settings = WarmUp.model_validate({"requests": requests, "autoGenerate": auto_generate})
    with pytest.raises(inputs.PlanError, match=message):
        inputs.plan_requests(
            settings=settings, inputs=inputs.model_inputs(VLLM_METADATA, VLLM_CONFIG)
        )


def test_nothing_to_send_is_refused_by_the_api() -> None:
    # The API model refuses it before a warm-up is planned; the plan refuses it too.
    with pytest.raises(ValueError, match="autoGenerate"):
        WarmUp.model_validate({"requests": [], "autoGenerate": False})
    settings = WarmUp.model_construct(requests=[], auto_generate=False)
    with pytest.raises(inputs.PlanError, match="neither requests nor autoGenerate"):
        inputs.plan_requests(
            settings=settings, inputs=inputs.model_inputs(VLLM_METADATA, VLLM_CONFIG)
        )


def test_numeric_explicit_request_resolves_variable_dims_from_data() -> None:
    settings = WarmUp.model_validate(
        {
            "requests": [
                {
                    "inputs": {
                        "ids": {
                            "datatype": "INT64",
                            "shape": [2, -1],
                            "data": [[3, 4, 5], [6, 7, 8]],
                        }
                    }
                }
            ],
            "autoGenerate": True,
        }
    )
    templates = inputs.plan_requests(
        settings=settings, inputs=inputs.model_inputs(NUMERIC_METADATA_GRPC)
    )
    ids = {t.name: t for t in templates[0].tensors}["ids"]
    assert ids.shape == (2, 3)
    assert ids.values == (3, 4, 5, 6, 7, 8)


def test_budget_is_four_times_count() -> None:
    assert verdict.budget(settings=WarmUp(count=8)) == 32


def ok(*latencies: float) -> list[verdict.Sample]:
    return [verdict.Sample(ok=True, latency_seconds=x) for x in latencies]


CRITERIA = WarmUp(count=4, success=WarmUpSuccess(stable_last_n=3, max_latency_factor=1.5))


@pytest.mark.parametrize(
    ("samples", "expected_reason"),
    [
        pytest.param(ok(2.0, 0.1, 0.1), None, id="too-few-to-judge-beyond-cold"),
        pytest.param(ok(0.1, 0.1, 0.1), None, id="stable-but-count-not-reached"),
        pytest.param(ok(2.0, 0.1, 0.1, 0.1), reasons.WARMED_UP, id="stable-after-cold"),
        pytest.param(ok(2.0, 1.0, 0.5, 0.25), None, id="still-getting-faster"),
        pytest.param(
            ok(3.0, 2.0, 1.0, 0.5, 0.1, 0.1, 0.1),
            reasons.WARMED_UP,
            id="beyond-count-until-stable",
        ),
        pytest.param(ok(0.1, 0.1, 0.1, 0.3), None, id="last-one-too-slow"),
        # Within 1.5x of each other but still falling request by request.
        pytest.param(ok(1.04, 0.88, 0.71, 0.54), None, id="gradual-decay-still-falling"),
        pytest.param(ok(1.04, 0.88, 0.71, 0.54, 0.55), reasons.WARMED_UP, id="decay-levelled-off"),
        pytest.param(
            ok(0.001, 0.001, 0.001, 0.004), reasons.WARMED_UP, id="jitter-under-noise-floor"
        ),
        pytest.param(
            [*ok(0.1, 0.1), verdict.Sample(ok=False, latency_seconds=0.1, error="boom")],
            reasons.REQUEST_FAILED,
            id="any-failure-fails",
        ),
        pytest.param(
            [verdict.Sample(ok=False, latency_seconds=0.1, error="x", status="503")],
            reasons.REQUEST_FAILED,
            id="server-error-is-the-pods",
        ),
        pytest.param(
            [*ok(0.1), verdict.Sample(ok=False, latency_seconds=0.1, error="x", status="400")],
            reasons.INVALID_REQUEST,
            id="http-400-is-the-specs",
        ),
        pytest.param(
            [
                verdict.Sample(
                    ok=False, latency_seconds=0.1, error="x", status="StatusCode.INVALID_ARGUMENT"
                )
            ],
            reasons.INVALID_REQUEST,
            id="grpc-invalid-argument-is-the-specs",
        ),
        pytest.param(ok(*[0.1, 1.0] * 8), reasons.NOT_STABLE, id="budget-spent-unstable"),
    ],
)
def test_judge(samples: list[verdict.Sample], expected_reason: str | None) -> None:
    result = verdict.judge(samples=samples, settings=CRITERIA, duration_seconds=3.0)
    assert (result.reason if result else None) == expected_reason
    if result is not None:
        assert result.ok == (expected_reason == reasons.WARMED_UP)
        assert result.requests == len(samples)


def test_success_message_carries_the_figures() -> None:
    result = verdict.judge(samples=ok(2.0, 0.1, 0.1, 0.1), settings=CRITERIA, duration_seconds=2.3)
    assert result is not None
    assert result.message == (
        "warmed up with 4 requests in 2.3 s; median latency 100 ms over the last 3 "
        "(first request 2000 ms)"
    )
    assert result.median_latency_seconds == pytest.approx(0.1)
    assert result.first_latency_seconds == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("attempt", "delay"),
    [
        pytest.param(0, 0.0, id="first-try"),
        pytest.param(1, 10.0, id="after-one-failure"),
        pytest.param(3, 40.0, id="doubles"),
        pytest.param(20, 300.0, id="capped"),
    ],
)
def test_backoff(attempt: int, delay: float) -> None:
    assert verdict.backoff_seconds(attempt=attempt) == delay


def test_give_up_after_max_attempts() -> None:
    settings = WarmUp(max_attempts=3)
    assert [verdict.should_give_up(attempts=a, settings=settings) for a in (1, 2, 3)] == [
        False,
        False,
        True,
    ]


def test_deletion_cost_orders_starting_then_warming_then_least_loaded() -> None:
    pods = {
        "busy": pod_annotations.deletion_cost(containers_ready=True, warmed=True, load=12.5),
        "idle": pod_annotations.deletion_cost(containers_ready=True, warmed=True, load=0.5),
        "unknown-load": pod_annotations.deletion_cost(
            containers_ready=True, warmed=True, load=None
        ),
        "warming": pod_annotations.deletion_cost(containers_ready=True, warmed=False, load=50.0),
        "starting": pod_annotations.deletion_cost(containers_ready=False, warmed=False, load=None),
    }
    # The ReplicaSet removes the lowest cost first.
    assert sorted(pods, key=pods.__getitem__) == [
        "starting",
        "warming",
        "unknown-load",
        "idle",
        "busy",
    ]
    assert all(-(2**31) <= c < 2**31 for c in pods.values())


@pytest.mark.parametrize(
    ("prev", "cur", "rate"),
    [
        pytest.param((100, 0.0), (160, 30.0), 2.0, id="rate"),
        pytest.param((100, 0.0), (5, 30.0), None, id="counter-reset"),
        pytest.param((100, 30.0), (100, 30.0), None, id="same-sample"),
    ],
)
def test_request_rate(
    prev: tuple[float, float], cur: tuple[float, float], rate: float | None
) -> None:
    assert (
        pod_annotations.request_rate(
            previous_count=prev[0], previous_time=prev[1], count=cur[0], time=cur[1]
        )
        == rate
    )


def pod(
    name: str,
    *,
    created: str,
    ready_at: str | None = None,
    warmed_at: str | None = None,
    md: str = "llm",
    namespace: str = "ns",
    annotations: dict[str, str] | None = None,
    ip: str | None = "198.18.0.10",
) -> dict[str, Any]:
    conditions = []
    if ready_at:
        conditions.append(
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": ready_at}
        )
    if warmed_at:
        conditions.append(
            {"type": podfacts.CONDITION_TYPE, "status": "True", "lastTransitionTime": warmed_at}
        )
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "labels": {podfacts.MD_LABEL: md},
            "annotations": annotations or {},
        },
        "status": {"podIP": ip, "conditions": conditions},
    }


def test_pod_facts_and_needs_warmup() -> None:
    warming = podfacts.read(
        pod("a", created="2026-01-01T00:00:00Z", ready_at="2026-01-01T00:01:30Z")
    )
    assert warming.containers_ready and not warming.warmed
    assert startup.seconds_to_ready(warming) == 90.0
    assert gate.needs_warmup(warming)
    warmed = podfacts.read(
        pod(
            "b",
            created="2026-01-01T00:00:00Z",
            ready_at="2026-01-01T00:01:30Z",
            warmed_at="2026-01-01T00:02:00Z",
        )
    )
    assert not gate.needs_warmup(warmed)
    starting = podfacts.read(pod("c", created="2026-01-01T00:00:00Z"))
    assert not gate.needs_warmup(starting)


def test_condition_keeps_transition_time_while_status_unchanged() -> None:
    first = gate.warmed_condition(
        status=False,
        reason=reasons.REQUEST_FAILED,
        message="x",
        now=1_700_000_000.0,
        previous=None,
    )
    assert first.last_transition_time == "2023-11-14T22:13:20Z"
    again = gate.warmed_condition(
        status=False, reason=reasons.TIMEOUT, message="y", now=1_700_000_100.0, previous=first
    )
    assert again.last_transition_time == first.last_transition_time
    flipped = gate.warmed_condition(
        status=True, reason=reasons.WARMED_UP, message="z", now=1_700_000_200.0, previous=again
    )
    assert flipped.last_transition_time == "2023-11-14T22:16:40Z"
    assert gate.status_patch(flipped) == {
        "status": {
            "conditions": [
                {
                    "type": podfacts.CONDITION_TYPE,
                    "status": "True",
                    "reason": reasons.WARMED_UP,
                    "message": "z",
                    "lastTransitionTime": "2023-11-14T22:16:40Z",
                }
            ]
        }
    }


def test_stats_take_median_of_recent_pods_of_one_modeldeployment() -> None:
    pods = [
        # Annotated figures win over condition times (they survive container restarts).
        pod(
            "a",
            created="2026-01-01T00:00:00Z",
            ready_at="2026-01-01T00:00:40Z",
            annotations={
                podfacts.ANNOTATION_SECONDS_TO_READY: "30",
                podfacts.ANNOTATION_SECONDS_TO_WARM: "45",
            },
        ),
        pod(
            "b",
            created="2026-01-01T00:10:00Z",
            ready_at="2026-01-01T00:11:00Z",
            warmed_at="2026-01-01T00:11:20Z",
        ),
        pod("c", created="2026-01-01T00:20:00Z", ready_at="2026-01-01T00:20:50Z"),
        pod(
            "other-md",
            created="2026-01-01T00:30:00Z",
            md="other",
            annotations={podfacts.ANNOTATION_SECONDS_TO_READY: "999"},
        ),
        pod(
            "other-ns",
            created="2026-01-01T00:30:00Z",
            namespace="elsewhere",
            annotations={podfacts.ANNOTATION_SECONDS_TO_READY: "999"},
        ),
    ]
    facts = [podfacts.read(p) for p in pods]
    stats = startup.stats_for(md_namespace="ns", md_name="llm", pods=facts)
    assert stats == startup.StartupStats(
        samples_ready=3, samples_warm=2, median_seconds_to_ready=50.0, median_seconds_to_warm=62.5
    )
    newest_two = startup.stats_for(md_namespace="ns", md_name="llm", pods=facts, recent=2)
    assert newest_two.median_seconds_to_ready == 55.0
    empty = startup.stats_for(md_namespace="ns", md_name="none", pods=facts)
    assert empty.median_seconds_to_warm is None


def test_the_api_request_form_plans_tensors_and_parameters() -> None:
    spec = ModelDeploymentSpec.model_validate(
        {
            "model": {"name": "toy_llm", "repository": "/models"},
            "warmUp": {
                "protocol": "HTTP",
                "count": 4,
                "requests": [
                    {
                        "inputs": {
                            "text_input": {"datatype": "BYTES", "shape": [1], "data": ["hi"]}
                        },
                        "parameters": {"max_tokens": 4},
                    }
                ],
            },
        }
    )
    settings = spec.warm_up
    assert (settings.protocol, settings.count, settings.concurrency) == ("HTTP", 4, 2)
    assert settings.success == WarmUpSuccess(stable_last_n=3, max_latency_factor=1.5)
    (template,) = inputs.plan_requests(
        settings=settings, inputs=inputs.model_inputs(VLLM_METADATA, VLLM_CONFIG)
    )
    assert template.parameters == {"max_tokens": 4}
    assert {t.name: t.values for t in template.tensors}["text_input"] == (b"hi",)


def crashed_pod(restarts: int, *, running_now: bool = True, code: int = 1) -> dict[str, Any]:
    body = pod("x", created="2026-01-01T00:00:00Z")
    state: dict[str, Any] = {"waiting": {"reason": "CrashLoopBackOff"}}
    if not running_now:
        state = {"terminated": {"exitCode": code, "reason": "Error"}}
    body["status"]["containerStatuses"] = [
        {
            "name": "triton",
            "restartCount": restarts,
            "state": state,
            "lastState": {
                "terminated": {"exitCode": code, "reason": "Error", "message": "failed to load"}
            }
            if restarts
            else {},
        }
    ]
    return body


@pytest.mark.parametrize(
    ("body", "restarts"),
    [
        pytest.param(pod("fresh", created="2026-01-01T00:00:00Z"), None, id="no-status"),
        pytest.param(crashed_pod(0), None, id="never-exited"),
        pytest.param(crashed_pod(2), 2, id="restarted-twice"),
        pytest.param(crashed_pod(2, running_now=False), 3, id="exited-again-now"),
    ],
)
def test_container_crashes(body: dict[str, Any], restarts: int | None) -> None:
    crashes = podfacts.read(body).crashes
    assert (crashes.restarts if crashes else None) == restarts
    if crashes is not None:
        assert "exit code 1" in crashes.message


def test_annotation_updates_write_figures_once_and_cost_by_state() -> None:
    warming = podfacts.read(
        pod("a", created="2026-01-01T00:00:00Z", ready_at="2026-01-01T00:01:30Z")
    )
    now = podfacts.time_or_none("2026-01-01T00:02:00Z")
    assert now is not None
    assert pod_annotations.annotation_updates(warming, now=now, load=None) == {
        podfacts.ANNOTATION_SECONDS_TO_READY: "90.0",
        podfacts.ANNOTATION_DELETION_COST: "-1000",
    }
    # About to be warmed: creation → now, the cost of a warmed idle pod, the attempt count.
    assert pod_annotations.annotation_updates(
        warming, now=now, load=None, warmed=True, attempts=1
    ) == {
        podfacts.ANNOTATION_SECONDS_TO_READY: "90.0",
        podfacts.ANNOTATION_SECONDS_TO_WARM: "120.0",
        podfacts.ANNOTATION_ATTEMPTS: "1",
        podfacts.ANNOTATION_WARMED_RESTARTS: "0",
        podfacts.ANNOTATION_DELETION_COST: "0",
    }
    settled = podfacts.read(
        pod(
            "b",
            created="2026-01-01T00:00:00Z",
            ready_at="2026-01-01T00:01:30Z",
            warmed_at="2026-01-01T00:01:50Z",
            annotations={
                podfacts.ANNOTATION_SECONDS_TO_READY: "90.0",
                podfacts.ANNOTATION_SECONDS_TO_WARM: "110.0",
                podfacts.ANNOTATION_DELETION_COST: "200",
            },
        )
    )
    assert (
        pod_annotations.annotation_updates(settled, now=now, load=2.2) == {}
    )  # 220 vs 200: not worth it
    assert pod_annotations.annotation_updates(settled, now=now, load=5.0) == {
        podfacts.ANNOTATION_DELETION_COST: "500"
    }


@pytest.mark.parametrize(
    ("old", "new", "update"),
    [
        pytest.param(None, 0, True, id="missing"),
        pytest.param(-1000, 0, True, id="warmed-now"),
        pytest.param(-2000, -1000, True, id="ready-now"),
        pytest.param(100, 105, False, id="small-wiggle"),
        pytest.param(100, 200, True, id="doubled"),
        pytest.param(0, 8, False, id="idle-noise"),
    ],
)
def test_cost_needs_update(old: int | None, new: int, update: bool) -> None:
    assert pod_annotations.cost_needs_update(old=old, new=new) is update


@pytest.mark.parametrize(
    ("restarts", "recorded", "cold"),
    [
        pytest.param(0, "0", False, id="no-restart"),
        pytest.param(1, "0", True, id="restarted-after-warm-up"),
        pytest.param(2, "2", False, id="restarts-before-warm-up"),
        pytest.param(3, None, False, id="warmed-by-an-older-operator"),
    ],
)
def test_cold_again_after_a_container_restart(
    restarts: int, recorded: str | None, cold: bool
) -> None:
    body = pod(
        "w",
        created="2026-01-01T00:00:00Z",
        ready_at="2026-01-01T00:01:00Z",
        warmed_at="2026-01-01T00:01:10Z",
        annotations={podfacts.ANNOTATION_WARMED_RESTARTS: recorded} if recorded else {},
    )
    body["status"]["containerStatuses"] = [{"name": "triton", "restartCount": restarts}]
    assert gate.cold_again(podfacts.read(body)) is cold
