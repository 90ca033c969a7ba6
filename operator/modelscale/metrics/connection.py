"""How the operator may reach Prometheus: which URLs a ModelDeployment may name, and the
credentials (bearer token, basic auth, client certificate, CA) the operator presents.
Pure: the settings and the checks; `metrics.transport` turns them into a `requests.Session`.

SSRF: `spec.scaling.prometheus.url` is chosen by whoever may create a ModelDeployment, and
the operator would send requests from inside the cluster (and with its credentials) to it.
So a URL is accepted only when it starts with one of the allowed prefixes set by the
cluster admin (chart value `prometheus.allowedUrls`; default: the operator's own
Prometheus URL): same scheme, same host and port, and a path under the prefix's path.
Redirects are never followed (a redirect would leave the allow-list), and credentials
are sent only to the operator's own Prometheus (scheme, host and port of
`--prometheus-url`), never to a URL from a spec.

Credentials come from files, one per key, of a Secret mounted into the operator pod
(chart value `prometheus.auth.secretName`): `token` (bearer), `username` and `password`
(basic auth), `ca.crt` (CA bundle to verify Prometheus), `tls.crt` and `tls.key` (client
certificate for mTLS). They are read when a session is built (each scaling pass), so a
rotated Secret is picked up without a restart, and never logged."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
SECRET_KEYS = ("token", "username", "password", "ca.crt", "tls.crt", "tls.key")


class URLRefusedError(ValueError):
    """A Prometheus URL outside the allow-list (or malformed); the message says why."""


@dataclass(frozen=True)
class AllowedPrefix:
    """`https://prometheus.monitoring.svc:9090/` or `https://mimir.example/prometheus`."""

    scheme: str
    host: str
    port: int
    path: str
    """Without a trailing slash; empty for the whole server."""

    def __str__(self) -> str:
        return f"{self.scheme}://{_netloc(self.host, self.port)}{self.path or '/'}"

    def admits(self, url: SplitResult, *, port: int) -> bool:
        if (url.scheme, (url.hostname or "").lower(), port) != (self.scheme, self.host, self.port):
            return False
        path = url.path.rstrip("/")
        return not self.path or path == self.path or path.startswith(self.path + "/")


@dataclass(frozen=True)
class Credentials:
    """Where the mounted Secret's files are; None: no credentials."""

    directory: Path | None = None
    insecure_skip_verify: bool = False
    """Do not verify Prometheus's certificate (tests, never production)."""

    def file(self, key: str) -> Path | None:
        """The Secret key's file when it exists."""
        if self.directory is None:
            return None
        path = self.directory / key
        return path if path.is_file() else None


@dataclass(frozen=True)
class Access:
    """The operator's Prometheus settings: its own URL (the one credentials go to), the
    URL prefixes a spec may use, and the credentials."""

    default_url: str
    allowed: tuple[AllowedPrefix, ...]
    credentials: Credentials = field(default_factory=Credentials)

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be queried, or None."""
        return refusal(url, allowed=self.allowed)

    def sends_credentials_to(self, url: str) -> bool:
        return _origin(url) == _origin(self.default_url)


def access(
    *,
    default_url: str,
    allowed: Sequence[str] = (),
    credentials_dir: str | None = None,
    insecure_skip_verify: bool = False,
) -> Access:
    """Parse the operator's settings once; an empty `allowed` admits the default URL only.
    Raises URLRefusedError with a message saying which setting to fix."""
    prefixes = tuple(parse_allowed(text) for text in (allowed or [default_url]))
    checked = refusal(default_url, allowed=prefixes)
    if checked is not None:
        raise URLRefusedError(f"--prometheus-url: {checked}")
    directory = Path(credentials_dir) if credentials_dir else None
    if directory is not None and not directory.is_dir():
        raise URLRefusedError(
            f"--prometheus-auth-dir {credentials_dir}: no such directory (mount the Secret "
            f"with keys {', '.join(SECRET_KEYS)} there)"
        )
    return Access(
        default_url=default_url,
        allowed=prefixes,
        credentials=Credentials(directory=directory, insecure_skip_verify=insecure_skip_verify),
    )


def parse_allowed(text: str) -> AllowedPrefix:
    """`scheme://host[:port][/path]` -> AllowedPrefix; URLRefusedError says what is wrong."""
    url, port = _split(text, what=f"allowed Prometheus URL {text!r}")
    return AllowedPrefix(
        scheme=url.scheme,
        host=(url.hostname or "").lower(),
        port=port,
        path=url.path.rstrip("/"),
    )


def refusal(url: str, *, allowed: Sequence[AllowedPrefix]) -> str | None:
    """Why the operator must not query `url`, naming the allowed prefixes; None if it may."""
    listed = ", ".join(str(p) for p in allowed) or "(none)"
    try:
        parts, port = _split(url, what=f"Prometheus URL {url!r}")
    except URLRefusedError as err:
        return str(err)
    if any(p.admits(parts, port=port) for p in allowed):
        return None
    return (
        f"Prometheus URL {url} is not allowed by the operator (allowed prefixes: {listed}); "
        "use one of them or ask the cluster admin to add it to prometheus.allowedUrls"
    )


_DOT_SEGMENT = re.compile(r"(^|/)\.\.?(/|$)")


def _split(text: str, *, what: str) -> tuple[SplitResult, int]:
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError as err:
        raise URLRefusedError(f"{what}: {err}") from err
    if url.scheme not in DEFAULT_PORTS:
        raise URLRefusedError(f"{what}: the scheme must be http or https")
    if not url.hostname:
        raise URLRefusedError(f"{what}: no host")
    if url.username is not None or url.password is not None:
        raise URLRefusedError(
            f"{what}: credentials in the URL are not allowed (they would show in status and "
            "logs); put them in the Prometheus auth Secret"
        )
    if url.query or url.fragment:
        raise URLRefusedError(f"{what}: no query string or fragment allowed")
    # `/allowed/../admin` would leave the prefix once a proxy normalises the path.
    if _DOT_SEGMENT.search(unquote(url.path)) or "\\" in unquote(url.path):
        raise URLRefusedError(f"{what}: no '.' or '..' path segments allowed")
    return url, port if port is not None else DEFAULT_PORTS[url.scheme]


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts, port = _split(url, what="url")
    except URLRefusedError:
        return None
    return parts.scheme, (parts.hostname or "").lower(), port


def _netloc(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}"
