"""How the simulator tests build a Trace: arrivals as given, and each token count either
one value for every request or one value per request."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from modelscale.simulate.trace import Trace


def tokens(value: int | ArrayLike, n: int) -> NDArray[np.int64]:
    """`value` for each of `n` requests, or the per-request counts as given."""
    if np.ndim(value) == 0:
        return np.full(n, value, dtype=np.int64)
    return np.asarray(value, dtype=np.int64)


def make_trace(
    name: str,
    arrivals: ArrayLike,
    *,
    inp: int | ArrayLike,
    out: int | ArrayLike,
    duration_s: float,
) -> Trace:
    """A trace of requests at `arrivals` (seconds, sorted) with these prompt and output
    token counts."""
    arrival_s = np.asarray(arrivals, dtype=np.float64)
    n = arrival_s.size
    return Trace(
        name=name,
        arrival_s=arrival_s,
        input_tokens=tokens(inp, n),
        output_tokens=tokens(out, n),
        duration_s=duration_s,
    )
