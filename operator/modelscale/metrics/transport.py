"""The HTTP session the operator queries Prometheus with, built from `connection.Access`:
every request is checked against the allow-list before it is sent, redirects are never
followed, and credentials (bearer token, basic auth, client certificate) go only to the
operator's own Prometheus. Build one per scaling pass (`with session(access) as s:`), so
rotated Secret files are read again."""

from __future__ import annotations

from typing import Any

import requests

from modelscale.metrics import connection


class URLNotAllowedError(requests.exceptions.InvalidURL):
    """Raised before anything is sent; a RequestException, so callers that handle
    Prometheus being unreachable report it the same way, per ModelDeployment."""


class GuardedSession(requests.Session):
    def __init__(self, access: connection.Access) -> None:
        super().__init__()
        self._access = access
        creds = access.credentials
        ca = creds.file("ca.crt")
        self.verify = False if creds.insecure_skip_verify else (str(ca) if ca else True)
        # Never hand a user's URL a ~/.netrc password or a proxy from the environment.
        self.trust_env = False
        self._headers: dict[str, str] = {}
        self._auth: tuple[str, str] | None = None
        self._cert: tuple[str, str] | None = None
        token = creds.file("token")
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token.read_text().strip()}"
        username, password = creds.file("username"), creds.file("password")
        if username is not None and password is not None:
            self._auth = (username.read_text().strip(), password.read_text().strip())
        cert, key = creds.file("tls.crt"), creds.file("tls.key")
        if cert is not None and key is not None:
            self._cert = (str(cert), str(key))

    def request(
        self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any
    ) -> requests.Response:
        text = url.decode() if isinstance(url, bytes) else url
        why = self._access.refusal(text)
        if why is not None:
            raise URLNotAllowedError(why)
        kwargs["allow_redirects"] = False
        if self._access.sends_credentials_to(text):
            kwargs["headers"] = {**self._headers, **(kwargs.get("headers") or {})}
            if self._auth is not None:
                kwargs["auth"] = self._auth
            if self._cert is not None:
                kwargs["cert"] = self._cert
        response = super().request(method, url, *args, **kwargs)
        if response.is_redirect:
            where = response.headers.get("Location", "?")
            response.close()
            raise requests.exceptions.TooManyRedirects(
                f"Prometheus at {text} answered {response.status_code} redirecting to "
                f"{where}: redirects are not followed; configure the final URL"
            )
        return response


def session(access: connection.Access) -> GuardedSession:
    return GuardedSession(access)
