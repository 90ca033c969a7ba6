"""Is a variant's change in missed windows and cost more than the cases' chance?

    .venv/bin/python bench/paired.py BASE.log VARIANT.log [VARIANT.log ...]

Each file is what `bench/tune.py` printed (one line per case and seed). Every variant is
paired with the base on the same (case, seed): the change in windows missed, summed, and
in the oracle multiple, averaged; with a 90 % interval from resampling the cases (the
unit a policy change moves: seeds of one case share the trace). An interval that holds
0 is a change the cases do not tell from chance; docs/policy.md ("Twentieth split")
quotes it beside the guard, which stays the total count.

Hand-written: a percentile bootstrap over a few dozen cases is a few lines, and numpy
(already a dependency) gives the resampling.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tune

DRAWS = 4000
SEED = 1


class Paired(NamedTuple):
    variant: str
    cases: int
    missed: int  # change in windows missed, summed over cases and seeds
    missed_lo: float
    missed_hi: float
    x_oracle: float  # change in the mean oracle multiple
    x_lo: float
    x_hi: float
    worse: int  # cases missing more windows
    better: int


def runs(path: Path) -> dict[tuple[str, int], tune.Row]:
    out = {}
    for text in path.read_text().splitlines():
        row = tune.parse_line(text)
        if row is not None:
            out[(row.case, row.seed)] = row
    if not out:
        raise SystemExit(f"{path}: no line of bench/tune.py's output; give its printed log")
    return out


def paired(
    base: dict[tuple[str, int], tune.Row], variant: dict[tuple[str, int], tune.Row], name: str
) -> Paired:
    keys = sorted(base.keys() & variant.keys())
    if keys != sorted(base.keys()) or keys != sorted(variant.keys()):
        raise SystemExit(
            f"{name}: its cases and seeds differ from the base's "
            f"({len(variant)} runs against {len(base)}); run both on the same --case/--seeds"
        )
    cases = sorted({c for c, _ in keys})
    seeds = {c: [s for cc, s in keys if cc == c] for c in cases}
    dm = np.array([sum(variant[c, s].missed - base[c, s].missed for s in seeds[c]) for c in cases])
    dx = np.array(
        [
            sum(variant[c, s].x_oracle - base[c, s].x_oracle for s in seeds[c]) / len(seeds[c])
            for c in cases
        ]
    )
    rng = np.random.default_rng(SEED)
    pick = rng.integers(0, len(cases), size=(DRAWS, len(cases)))
    bm = dm[pick].sum(axis=1)
    bx = dx[pick].mean(axis=1)
    return Paired(
        variant=name,
        cases=len(cases),
        missed=int(dm.sum()),
        missed_lo=float(np.percentile(bm, 5)),
        missed_hi=float(np.percentile(bm, 95)),
        x_oracle=float(dx.mean()),
        x_lo=float(np.percentile(bx, 5)),
        x_hi=float(np.percentile(bx, 95)),
        worse=int((dm > 0).sum()),
        better=int((dm < 0).sum()),
    )


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    base = runs(Path(argv[0]))
    for name in argv[1:]:
        p = paired(base, runs(Path(name)), name)
        print(
            f"{p.variant}: windows missed {p.missed:+d} (90 %: {p.missed_lo:+.0f} to "
            f"{p.missed_hi:+.0f}), x oracle {p.x_oracle:+.4f} ({p.x_lo:+.4f} to {p.x_hi:+.4f}); "
            f"{p.worse} cases miss more, {p.better} fewer, of {p.cases}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
