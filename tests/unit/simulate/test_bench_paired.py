"""`bench/paired.py`: a variant's change in missed windows and cost, paired with the base
on the same case and seed, with an interval from resampling the cases; it reads what
`bench/tune.py` prints and refuses logs it cannot pair."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import paired  # bench/ is a scripts directory, put on the path above
import tune


def row(case: str, seed: int, missed: int, ratio: float) -> tune.Row:
    return tune.Row(
        case=case,
        seed=seed,
        label="defaults",
        attainment=1.0 - missed / 90.0,
        missed=missed,
        replica_seconds=12_345.0 * ratio,
        x_oracle=ratio,
        events=7,
        elapsed_s=2.0,
    )


def write(path: Path, rows: list[tune.Row]) -> Path:
    lines = ["Importing plotly failed."] + [tune.line(r) for r in rows] + ["total defaults: ..."]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_printed_line_reads_back_as_the_run() -> None:
    r = row("servegen-m-large-d11-night", 2, 3, 1.412)
    back = tune.parse_line(tune.line(r))
    assert back is not None
    assert (back.case, back.seed, back.missed, back.x_oracle) == (r.case, 2, 3, 1.412)
    assert back.replica_seconds == pytest.approx(r.replica_seconds, abs=0.5)
    assert tune.parse_line("total defaults: 297 windows missed over 3 seed(s)") is None


def test_a_loss_on_most_cases_is_told_from_chance_and_a_mixed_one_is_not(
    tmp_path: Path,
) -> None:
    cases = [f"case-{i}" for i in range(30)]
    base = [row(c, s, 2, 1.30) for c in cases for s in range(3)]
    # Every case misses one window more on each seed and costs 0.02 less.
    worse = [row(c, s, 3, 1.28) for c in cases for s in range(3)]
    # Half the cases miss one more, half one fewer: no change on the whole.
    mixed = [row(c, s, 3 if i % 2 else 1, 1.30) for i, c in enumerate(cases) for s in range(3)]
    b = paired.runs(write(tmp_path / "base.log", base))
    lost = paired.paired(b, paired.runs(write(tmp_path / "worse.log", worse)), "worse")
    assert lost.missed == 90 and lost.missed_lo > 0 and lost.worse == 30
    assert lost.x_oracle == pytest.approx(-0.02) and lost.x_hi < 0
    even = paired.paired(b, paired.runs(write(tmp_path / "mixed.log", mixed)), "mixed")
    assert even.missed == 0 and even.missed_lo < 0 < even.missed_hi
    assert (even.worse, even.better) == (15, 15)


def test_logs_of_different_cases_or_no_runs_are_refused_with_what_to_do(tmp_path: Path) -> None:
    b = paired.runs(write(tmp_path / "base.log", [row("a", 0, 0, 1.1), row("b", 0, 0, 1.1)]))
    other = paired.runs(write(tmp_path / "other.log", [row("a", 0, 0, 1.1)]))
    with pytest.raises(SystemExit, match="same --case/--seeds"):
        paired.paired(b, other, "other")
    empty = tmp_path / "empty.log"
    empty.write_text("Traceback (most recent call last):\n")
    with pytest.raises(SystemExit, match=r"no line of bench/tune\.py's output"):
        paired.runs(empty)
