"""`bench/misses.py`: a missed minute is classed by ours' fleet against the oracle's need
there, so a round can tell an ask that came too late from one that never came."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import misses  # bench/ is a scripts directory, put on the path above


def test_a_missed_minute_is_classed_by_what_was_warm_and_what_was_asked() -> None:
    need = [2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 3]
    warmed = {6: 2, 7: 4, 11: 2}
    created = {6: 4, 7: 4, 11: 2}
    counts = misses.classify(need, warmed, created, [6, 7, 11])
    assert counts == {
        ("asked, not warm", "rising"): 1,  # 4 created, 2 warm, need up from 2
        ("warmed >= need", "rising"): 1,
        ("not asked", "flat/falling"): 1,  # need 3, down from 4: only 2 asked
    }


def test_a_minute_past_the_oracles_schedule_uses_its_last_need_and_no_need_counts_nothing() -> None:
    assert misses.classify([1, 3], {5: 1}, {5: 1}, [5]) == {("not asked", "rising"): 1}
    assert not misses.classify([], {}, {}, [0])
