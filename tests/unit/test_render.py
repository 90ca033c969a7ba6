"""`modelscale render -f`: the children the operator would apply, printed for review; bad
files give one line naming what to fix."""

from __future__ import annotations

import io
import pathlib
from typing import Any

import kubernetes_validate
import pytest
import yaml

from modelscale import cli, render
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import deployment, pdb, service

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "manifests" / "samples").glob("*.yaml"))

MINIMAL = """\
apiVersion: modelscale.dev/v1alpha1
kind: ModelDeployment
metadata: {name: toy}
spec:
  model: {name: toy_llm, repository: /models}
"""


def run(
    argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str = ""
) -> tuple[int, str, str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdin", io.StringIO(stdin))
        code = cli.main(["render", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in SAMPLES])
def test_sample_renders_the_three_children_the_builders_make(
    path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["-f", str(path)], capsys)
    assert (code, err) == (0, "")
    docs = [d for d in yaml.safe_load_all(out) if d]
    (raw,) = [
        d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ModelDeployment"
    ]
    md = ModelDeployment.model_validate(raw)
    expected = [
        deployment.build(md, replicas=md.spec.min_replicas),
        service.build(md),
        pdb.build(md),
    ]
    for obj in expected:
        del obj["metadata"]["ownerReferences"]  # the live object's uid: not in a file
    assert docs == expected
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34", strict=True)
    assert out.count(f"# Source: {path}: {md.namespace}/{md.name}\n") == 3


@pytest.mark.parametrize(
    ("spec", "replicas"),
    [
        pytest.param({"minReplicas": 2, "maxReplicas": 4}, 2, id="predictive-starts-at-min"),
        pytest.param({"scaling": {"mode": "External"}, "replicas": 3}, 3, id="external-spec"),
        pytest.param(
            {"scaling": {"mode": "RecommendOnly"}, "replicas": 2}, 2, id="recommend-only-spec"
        ),
    ],
)
def test_deployment_gets_the_replicas_a_first_reconcile_applies(
    spec: dict[str, Any], replicas: int
) -> None:
    doc = yaml.safe_load(MINIMAL)
    doc["spec"].update(spec)
    (item,) = render.render_text(yaml.safe_dump(doc), filename="md.yaml")
    assert item.objects[0]["spec"]["replicas"] == replicas


def test_namespace_defaults_like_kubectl_and_can_be_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["-f", "-"], capsys, stdin=MINIMAL)
    assert code == 0
    assert {d["metadata"]["namespace"] for d in yaml.safe_load_all(out)} == {"default"}
    code, out, _ = run(["-f", "-", "-n", "llm"], capsys, stdin=MINIMAL)
    assert {d["metadata"]["namespace"] for d in yaml.safe_load_all(out)} == {"llm"}


def test_other_kinds_in_the_file_are_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\n---\n" + MINIMAL
    code, out, _ = run(["-f", "-"], capsys, stdin=text)
    assert code == 0
    assert [d["kind"] for d in yaml.safe_load_all(out)] == [
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            MINIMAL + "  minReplicas: 5\n  maxReplicas: 2\n",
            "md.yaml: document 1: spec: minReplicas must be less than or equal to maxReplicas",
            id="min-over-max",
        ),
        pytest.param(
            MINIMAL + "  server: {gpu: 1}\n",
            "md.yaml: document 1: spec.server.gpu: Extra inputs are not permitted",
            id="typo",
        ),
        pytest.param(
            MINIMAL.replace("metadata: {name: toy}", "metadata: {}"),
            "md.yaml: document 1: metadata.name: Field required",
            id="no-name",
        ),
        pytest.param("a: [\n", "md.yaml: not valid YAML at line 2", id="not-yaml"),
        pytest.param(
            "apiVersion: v1\nkind: ConfigMap\n",
            "md.yaml: no ModelDeployment (modelscale.dev/v1alpha1) in the file",
            id="nothing-to-render",
        ),
        pytest.param(
            MINIMAL.replace("modelscale.dev/v1alpha1", "example.com/v1"),
            "md.yaml: document 1: apiVersion must be modelscale.dev/v1alpha1",
            id="wrong-group",
        ),
    ],
)
def test_bad_file_gives_one_line_naming_what_to_fix(
    text: str, message: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "md.yaml"
    path.write_text(text)
    code, out, err = run(["-f", str(path)], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("modelscale render: ")
    assert message in err.replace(str(tmp_path) + "/", "")


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["-f", "/nonexistent/md.yaml"], capsys)
    assert code == 1
    assert (
        err == "modelscale render: /nonexistent/md.yaml: cannot read: No such file or directory\n"
    )


def test_render_is_listed_in_the_cli_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "render" in capsys.readouterr().out
