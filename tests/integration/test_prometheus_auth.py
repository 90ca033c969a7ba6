"""Prometheus as it runs in production, behind auth: a real `prometheus` started with a
`--web.config.file` that requires TLS, a client certificate (mTLS) and basic auth. The
operator's session (`metrics.transport`) reaches it with the credentials of a mounted Secret
(files as Kubernetes writes them), and refuses what it must: URLs outside the allow-list,
redirects, and handing its credentials to any other server."""

from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import requests

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.metrics import batch, connection, groups, prometheus, promql, transport

pytestmark = pytest.mark.prometheus

USERNAME = "modelscale"
PASSWORD = "modelscale-test"
# bcrypt of PASSWORD (Prometheus's web config takes only bcrypt hashes); made with
# Python 3.11's crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=32)).
PASSWORD_BCRYPT = "$2b$05$wXogwiW.HYU1ah7PgdtuYu9vtnit1w6gJuW5jrtxkNlXDM56GX9Sq"
TOKEN = "bearer-token-for-test"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _certificates(root: Path) -> None:
    """A CA, Prometheus's serving certificate (127.0.0.1) and the operator's client one."""
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(root / "ca.key"), "-out", str(root / "ca.crt"), "-days", "2",
             "-subj", "/CN=modelscale-test-ca")  # fmt: skip
    for name, ext in (
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
        ("client", "extendedKeyUsage=clientAuth"),
    ):
        (root / f"{name}.ext").write_text(ext + "\n")
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", str(root / f"{name}.key"), "-out", str(root / f"{name}.csr"),
                 "-subj", f"/CN=modelscale-test-{name}")  # fmt: skip
        _openssl("x509", "-req", "-in", str(root / f"{name}.csr"), "-CA", str(root / "ca.crt"),
                 "-CAkey", str(root / "ca.key"), "-CAcreateserial", "-days", "2",
                 "-extfile", str(root / f"{name}.ext"),
                 "-out", str(root / f"{name}.crt"))  # fmt: skip


def secret_dir(root: Path, name: str, **files: str) -> Path:
    """A directory laid out as a mounted Secret: one file per key."""
    path = root / name
    path.mkdir()
    for key, text in files.items():
        (path / key.replace("_", ".")).write_text(text)
    return path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pki")
    _certificates(root)
    return root


@pytest.fixture(scope="module")
def secured_url(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not installed: run `make prometheus-install`")
    root = tmp_path_factory.mktemp("prometheus-auth")
    web = root / "web.yml"
    web.write_text(
        "tls_server_config:\n"
        f"  cert_file: {certs / 'server.crt'}\n"
        f"  key_file: {certs / 'server.key'}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_ca_file: {certs / 'ca.crt'}\n"
        "basic_auth_users:\n"
        f"  {USERNAME}: '{PASSWORD_BCRYPT}'\n"
    )
    (root / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
    port = _port()
    log_path = root / "prometheus.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [binary, f"--config.file={root / 'prometheus.yml'}", f"--web.config.file={web}",
             f"--storage.tsdb.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"https://127.0.0.1:{port}"
    probe = dict(
        auth=(USERNAME, PASSWORD),
        cert=(str(certs / "client.crt"), str(certs / "client.key")),
        verify=str(certs / "ca.crt"),
        timeout=1,
    )
    try:
        for _ in range(300):
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {log_path.read_text()[-2000:]}")
            try:
                if requests.get(f"{url}/-/ready", **probe).status_code == 200:  # type: ignore[arg-type]
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(
                f"prometheus with TLS and auth not ready after 60 s: {log_path.read_text()[-2000:]}"
            )
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def full_secret(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return secret_dir(
        tmp_path_factory.mktemp("secrets"),
        "full",
        username=USERNAME,
        password=PASSWORD + "\n",  # `kubectl create secret --from-file` keeps newlines
        ca_crt=(certs / "ca.crt").read_text(),
        tls_crt=(certs / "client.crt").read_text(),
        tls_key=(certs / "client.key").read_text(),
    )


def query_42(url: str, access: connection.Access) -> float:
    """`vector(42)` through the adapter the scaling loop uses."""
    with transport.session(access) as session:
        prom = prometheus.connect(url=url, timeout=5, session=session)
        result = prometheus.fetch_signals(
            url=url, queries={}, pods={}, timeout=5, session=session, prom=prom
        )
        assert result.queries == 0
        return float(prom.custom_query("vector(42)")[0]["value"][1])


def test_basic_auth_mtls_and_custom_ca_from_the_secret(secured_url: str, full_secret: Path) -> None:
    access = connection.access(default_url=secured_url, credentials_dir=str(full_secret))
    assert query_42(secured_url, access) == 42.0


@pytest.mark.parametrize(
    ("drop", "error"),
    [
        pytest.param(("password",), "401", id="no-password"),
        pytest.param(
            ("tls.crt", "tls.key"), "certificate required|alert|EOF|reset", id="no-client-cert"
        ),
        pytest.param(("ca.crt",), "CERTIFICATE_VERIFY_FAILED", id="no-ca"),
    ],
)
def test_each_missing_credential_is_refused_by_prometheus(
    secured_url: str, full_secret: Path, tmp_path: Path, drop: tuple[str, ...], error: str
) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(full_secret, partial)
    for key in drop:
        (partial / key).unlink()
    access = connection.access(default_url=secured_url, credentials_dir=str(partial))
    with (
        transport.session(access) as session,
        pytest.raises(prometheus.PrometheusError, match=error) as caught,
    ):
        prometheus.fetch_signals(
            url=secured_url, queries=promql.presets(backend="vllm"), pods={}, timeout=5,
            session=session,
        )  # fmt: skip
    assert PASSWORD not in str(caught.value)


class Recorder(http.server.BaseHTTPRequestHandler):
    """A plain HTTP server that records the Authorization header it gets, and redirects
    when asked to (a server an attacker controls)."""

    seen: ClassVar[list[str | None]] = []
    redirect_to: ClassVar[str | None] = None

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        if self.redirect_to:
            self.send_response(302)
            self.send_header("Location", self.redirect_to + self.path)
            self.end_headers()
            return
        body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, type[Recorder]]]:
    handler = type("R", (Recorder,), {"seen": [], "redirect_to": None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def md_with_url(name: str, url: str | None) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {
                "model": {"name": "llama", "repository": "/models"},
                "scaling": {"prometheus": {"url": url} if url else {}},
            },
        }
    )


def test_a_spec_url_outside_the_allow_list_is_refused_for_that_modeldeployment_alone(
    secured_url: str, full_secret: Path, recorder: tuple[str, type[Recorder]]
) -> None:
    other, handler = recorder
    access = connection.access(default_url=secured_url, credentials_dir=str(full_secret))
    mds = [md_with_url("ours", None), md_with_url("theirs", other)]
    with transport.session(access) as session:
        fetched = batch.fetch(
            groups.plan(mds, pods_by_md={}, default_url=secured_url),
            namespaces=(), now=time.time(), session=session,
        )  # fmt: skip
    assert set(fetched.unreachable) == {("team-a", "theirs")}
    why = fetched.unreachable[("team-a", "theirs")]
    assert f"Prometheus URL {other}/api/v1/query is not allowed" in why
    assert f"allowed prefixes: {secured_url}/" in why
    assert handler.seen == []  # nothing was sent there
    assert fetched.queries == len(promql.presets(backend="vllm"))  # ours was answered


def test_credentials_go_to_the_operators_prometheus_only(
    tmp_path: Path, recorder: tuple[str, type[Recorder]]
) -> None:
    server, handler = recorder
    secret = secret_dir(tmp_path, "token", token=TOKEN + "\n")
    presets = promql.presets(backend="vllm")
    # The recorder is the operator's own Prometheus: it gets the bearer token.
    own = connection.access(default_url=server, credentials_dir=str(secret))
    with transport.session(own) as session:
        prometheus.fetch_signals(url=server, queries=presets, pods={}, timeout=5, session=session)
    assert handler.seen == [f"Bearer {TOKEN}"] * len(presets)
    # The recorder is only an allowed spec URL: it gets no credentials.
    handler.seen.clear()
    other = connection.access(
        default_url="http://127.0.0.2:9", allowed=["http://127.0.0.2:9", server],
        credentials_dir=str(secret),
    )  # fmt: skip
    with transport.session(other) as session:
        prometheus.fetch_signals(url=server, queries=presets, pods={}, timeout=5, session=session)
    assert handler.seen == [None] * len(presets)


def test_a_redirect_to_an_unlisted_server_is_not_followed(
    secured_url: str, recorder: tuple[str, type[Recorder]]
) -> None:
    allowed, handler = recorder
    handler.redirect_to = secured_url
    access = connection.access(default_url=allowed)
    with (
        transport.session(access) as session,
        pytest.raises(prometheus.PrometheusError, match=f"redirecting to {secured_url}"),
    ):
        prometheus.fetch_signals(
            url=allowed, queries=promql.presets(backend="vllm"), pods={}, timeout=5,
            session=session,
        )  # fmt: skip
    assert len(handler.seen) == 1
