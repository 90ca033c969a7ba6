"""Which Prometheus URLs a ModelDeployment may name (SSRF allow-list), decided without I/O."""

from __future__ import annotations

import pytest

from modelscale.metrics import connection

ALLOWED = (
    connection.parse_allowed("http://prometheus.monitoring.svc:9090"),
    connection.parse_allowed("https://mimir.example.com/prometheus/"),
)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://prometheus.monitoring.svc:9090", id="exact"),
        pytest.param("http://PROMETHEUS.monitoring.svc:9090/", id="host-case-and-slash"),
        pytest.param("http://prometheus.monitoring.svc:9090/api/v1/query", id="request-path"),
        pytest.param("https://mimir.example.com/prometheus", id="prefix-exact"),
        pytest.param("https://mimir.example.com:443/prometheus/api/v1/query", id="default-port"),
    ],
)
def test_allowed(url: str) -> None:
    assert connection.refusal(url, allowed=ALLOWED) is None


# Well-formed URLs that no allowed entry covers: the message lists what is allowed.
OUTSIDE_THE_LIST = {
    "metadata-ip": "http://169.254.169.254/latest/meta-data",
    "other-port": "http://prometheus.monitoring.svc:9091",
    "other-scheme": "https://prometheus.monitoring.svc:9090",
    "prefix-not-segment": "https://mimir.example.com/prometheusx",
    "outside-prefix": "https://mimir.example.com/admin",
}
# URLs refused whatever the list allows: the message names what is wrong with the URL.
MALFORMED = {
    "dot-dot": ("https://mimir.example.com/prometheus/../admin", "'..'"),
    "encoded-dot-dot": ("https://mimir.example.com/prometheus/%2e%2e/admin", "'..'"),
    "userinfo": ("https://u:p@mimir.example.com/prometheus", "credentials"),
    "query": ("https://mimir.example.com/prometheus?x=1", "query string"),
    "file-scheme": ("file:///etc/passwd", "http or https"),
    "no-host": ("http://:9090", "no host"),
    "bad-port": ("http://prometheus.monitoring.svc:99999", "Port out of range"),
}


@pytest.mark.parametrize("url", OUTSIDE_THE_LIST.values(), ids=OUTSIDE_THE_LIST.keys())
def test_refused_outside_the_allowed_list(url: str) -> None:
    message = connection.refusal(url, allowed=ALLOWED)
    assert message is not None
    assert "not allowed" in message
    assert (
        "allowed prefixes: http://prometheus.monitoring.svc:9090/, "
        "https://mimir.example.com:443/prometheus" in message
    )


@pytest.mark.parametrize(("url", "why"), MALFORMED.values(), ids=MALFORMED.keys())
def test_refused_malformed_url_says_why(url: str, why: str) -> None:
    message = connection.refusal(url, allowed=ALLOWED)
    assert message is not None
    assert why in message


def test_default_allow_list_is_the_operators_own_prometheus() -> None:
    access = connection.access(default_url="http://prom.monitoring:9090")
    assert access.refusal("http://prom.monitoring:9090/api/v1/query") is None
    assert access.refusal("http://evil.example:9090") is not None


def test_credentials_go_only_to_the_operators_own_prometheus() -> None:
    access = connection.access(
        default_url="https://prom.monitoring:9090",
        allowed=["https://prom.monitoring:9090", "https://other.monitoring"],
    )
    assert access.sends_credentials_to("https://prom.monitoring:9090/api/v1/query")
    assert not access.sends_credentials_to("https://other.monitoring/api/v1/query")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"allowed": ["ftp://x"]}, "scheme must be http or https", id="bad-prefix"),
        pytest.param({"allowed": ["http://other:9090"]}, "--prometheus-url", id="default-outside"),
        pytest.param({"credentials_dir": "/nonexistent/x"}, "no such directory", id="no-secret"),
    ],
)
def test_bad_settings_say_what_to_fix(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(connection.URLRefusedError, match=message):
        connection.access(default_url="http://prom:9090", **kwargs)  # type: ignore[arg-type]
