"""Hypothesis strategies for ModelDeployments as users write them (camelCase JSON).

They aim at the edges of what the CRD may accept: names with dots or a leading digit and
names longer than 63 characters, quantities in every spelling (and negative ones), label keys
and values, topology keys, env entries with both `value` and `valueFrom`, a user volume named
`dshm`, replica bounds and scaling modes. Some of what they generate is invalid on purpose:
the property is that the apiserver either refuses it with a message or takes it and the
children built from it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

Json = dict[str, Any]

_DNS_LABEL = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,12}[a-z0-9])?\Z")

# DNS-1123 subdomains (what the apiserver allows as a ModelDeployment name), short and long.
names = st.one_of(
    st.lists(_DNS_LABEL, min_size=1, max_size=4).map(".".join),
    st.builds(
        lambda head, n: (head + "-" + "x" * n)[:253].rstrip("-.") or "x",
        _DNS_LABEL,
        st.integers(min_value=40, max_value=250),
    ),
).filter(lambda n: len(n) <= 253)

_QUANTITY_TEXT = st.one_of(
    st.builds(
        lambda number, suffix: f"{number}{suffix}",
        st.sampled_from(["0", "1", "4", "500", "1.5", ".5", "+2", "-1", "3."]),
        st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "E-2", "n", "u"]),
    ),
    st.sampled_from(["lots", "4 cores", "1Gb", ""]),
)
quantities = st.one_of(st.integers(min_value=-2, max_value=64), _QUANTITY_TEXT)

_KEY_NAME = st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?\Z")
label_keys = st.one_of(
    _KEY_NAME,
    st.builds(
        lambda p, n: f"{p}/{n}", st.sampled_from(["example.com", "a.b", "Bad_Prefix"]), _KEY_NAME
    ),
    st.sampled_from(
        ["kubernetes.io/hostname", "topology.kubernetes.io/zone", "a/b/c", "-x", "x" * 64]
    ),
)
label_values = st.one_of(
    st.from_regex(r"\A([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?\Z"),
    st.sampled_from(["has space", "x" * 64, "-lead", "trail.", "llama-3.1-8b"]),
)
label_maps = st.dictionaries(label_keys, label_values, max_size=3)

env_names = st.one_of(
    st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,10}\Z"),
    st.sampled_from(["1LEADING_DIGIT", "with.dot", "with-dash", "has=equals", "MY VAR", ""]),
)
# Any character a JSON string can hold (no lone surrogates), beyond U+FFFF included: emoji
# and CJK extension B once broke server-side apply (kube/apply.py, `apply_body`).
_TEXT = st.characters(exclude_categories=("Cs",))
_VALUE_FROM = st.sampled_from(
    [
        {"secretKeyRef": {"name": "hf-token", "key": "token"}},
        {"configMapKeyRef": {"name": "cfg", "key": "k"}},
        {"fieldRef": {"fieldPath": "metadata.name"}},
    ]
)


@st.composite
def env_entries(draw: st.DrawFn) -> list[Json]:
    out = []
    for name in draw(st.lists(env_names, max_size=3, unique=True)):
        entry: Json = {"name": name}
        which = draw(st.sampled_from(["value", "valueFrom", "both", "neither"]))
        if which in ("value", "both"):
            entry["value"] = draw(st.text(alphabet=_TEXT, max_size=8))
        if which in ("valueFrom", "both"):
            entry["valueFrom"] = draw(_VALUE_FROM)
        out.append(entry)
    return out


_VOLUME_NAMES = st.sampled_from(["dshm", "models", "cache", "Bad_Name"])


@st.composite
def pod_templates(draw: st.DrawFn) -> Json:
    volumes = [
        {"name": n, "emptyDir": {}} for n in draw(st.lists(_VOLUME_NAMES, max_size=2, unique=True))
    ]
    mounts = [
        {"name": v["name"], "mountPath": draw(st.sampled_from(["/models", "/cache", "/dev/shm"]))}
        for v in volumes
        if draw(st.booleans())
    ]
    # Two mounts at one path would be refused for reasons no spec field could prevent.
    seen: set[str] = set()
    mounts = [m for m in mounts if not (m["mountPath"] in seen or seen.add(m["mountPath"]))]
    return draw(
        st.fixed_dictionaries(
            {},
            optional={
                "labels": label_maps,
                "annotations": st.dictionaries(
                    label_keys, st.text(alphabet=_TEXT, max_size=10), max_size=2
                ),
                "volumes": st.just(volumes),
                "volumeMounts": st.just(mounts),
                "runtimeClassName": st.sampled_from(["nvidia", "Bad_Class"]),
            },
        )
    )


_RESOURCE_LISTS = st.fixed_dictionaries({}, optional={"cpu": quantities, "memory": quantities})

servers = st.fixed_dictionaries(
    {},
    optional={
        "image": st.sampled_from(["tritonserver:cpu", "nvcr.io/nvidia/tritonserver:24.10", " x "]),
        "imagePullPolicy": st.sampled_from(["Always", "IfNotPresent", "Never"]),
        "imagePullSecrets": st.lists(
            st.sampled_from(["regcred", "my.cred", "Bad_Cred"]), max_size=2
        ),
        "args": st.lists(
            st.sampled_from(["--log-verbose=1", "--model-control-mode=poll"]), max_size=2
        ),
        "env": env_entries(),
        "gpus": st.integers(min_value=0, max_value=8),
        "gpuResourceName": st.sampled_from(
            ["nvidia.com/gpu", "amd.com/gpu", "gpu", "example.com/My_GPU", "kubernetes.io/gpu"]
        ),
        "resources": st.fixed_dictionaries(
            {}, optional={"requests": _RESOURCE_LISTS, "limits": _RESOURCE_LISTS}
        ),
        "nodeSelector": label_maps,
        "tolerations": st.lists(
            st.sampled_from(
                [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "dedicated", "operator": "Equal", "value": "llm"},
                ]
            ),
            max_size=2,
            unique_by=lambda t: t["key"],
        ),
        "priorityClassName": st.sampled_from(["high", "Not_A_Name"]),
        "serviceAccountName": st.sampled_from(["triton", "s3.reader", "Bad_SA"]),
        "shmSize": st.one_of(st.none(), _QUANTITY_TEXT),
        "drainSeconds": st.integers(min_value=0, max_value=120),
        "terminationGracePeriodSeconds": st.integers(min_value=1, max_value=300),
        "podTemplate": pod_templates(),
    },
)

placements = st.fixed_dictionaries(
    {},
    optional={
        "antiAffinity": st.sampled_from(["Preferred", "Required", "None"]),
        "topologyKey": st.one_of(label_keys, st.sampled_from(["zone with space", "Topology/Zone"])),
        "spreadAcrossZones": st.booleans(),
    },
)


@st.composite
def specs(draw: st.DrawFn) -> Json:
    """A ModelDeployment spec as a user might write it, valid or not."""
    spec: Json = {
        "model": {
            "name": draw(st.sampled_from(["toy_llm", "llama-3.1-8b", "m"])),
            "repository": draw(st.sampled_from(["/models", "s3://bucket/models"])),
        }
    }
    lo = draw(st.integers(min_value=0, max_value=4))
    spec["minReplicas"] = lo
    spec["maxReplicas"] = draw(st.integers(min_value=max(1, lo - 1), max_value=lo + 6))
    mode = draw(st.sampled_from(["Predictive", "RecommendOnly", "External"]))
    spec["scaling"] = {"mode": mode}
    if mode == "External" and draw(st.booleans()):
        spec["replicas"] = draw(st.integers(min_value=0, max_value=spec["maxReplicas"]))
    spec["server"] = draw(servers)
    spec["placement"] = draw(placements)
    spec["disruption"] = {
        "maxUnavailable": draw(st.one_of(st.integers(0, 3), st.sampled_from(["25%", "100%"])))
    }
    return spec


def modeldeployment(name: str, namespace: str, spec: Json) -> Json:
    return {
        "apiVersion": "modelscale.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
