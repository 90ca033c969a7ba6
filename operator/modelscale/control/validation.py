"""Validation errors in words a user can act on."""

from __future__ import annotations

from pydantic import ValidationError


def short(err: ValidationError, *, limit: int = 5) -> str:
    """`spec.minReplicas: ...; spec.model.name: Field required` — field paths as the user
    wrote them (camelCase), at most `limit` problems."""
    parts = []
    for e in err.errors()[:limit]:
        path = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-"))
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{path}: {msg}" if path else msg)
    more = len(err.errors()) - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
