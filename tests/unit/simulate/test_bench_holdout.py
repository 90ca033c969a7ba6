"""`bench/holdout.py`: the held-out rule, run by a script, picks what the fourteenth and
fifteenth splits picked by hand (and every later split, chosen by it, stays
reproducible), and never a window that overlaps a case or holds a gap in the data."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import holdout  # bench/ is a scripts directory, put on the path above
import pytest
from cases import CASES

FOURTEENTH = ("servegen-m-large-d1-eve", "servegen-m-large-d1-late", "servegen-m-small-d10-dusk")
FIFTEENTH = ("servegen-m-large-d14-night", "servegen-m-large-d6-late", "servegen-m-small-d14-pm")
SIXTEENTH = ("servegen-m-large-d9-pm", "servegen-m-large-d5-night", "servegen-m-small-d6-pm")
SEVENTEENTH = ("servegen-m-large-d2-early", "servegen-m-large-d5-eve", "servegen-m-small-d10-noon")
EIGHTEENTH = ("servegen-m-large-d9-eve", "servegen-m-large-d8-night", "servegen-m-small-d12-am")
NINETEENTH = (
    "servegen-m-large-d8-late",
    "servegen-m-large-d9-midnight",
    "servegen-m-small-d10-early",
)
TWENTIETH = ("servegen-m-large-d14-noon", "servegen-m-large-d6-eve", "servegen-m-small-d12-night")
TWENTY_FIRST = (
    "servegen-m-large-d1-dusk",
    "servegen-m-large-d1-noon",
    "servegen-m-small-d14-afternoon",
)
TWENTY_SECOND = (
    "servegen-m-large-d14-morning",
    "servegen-m-large-d8-morning",
    "servegen-m-small-d10-morning",
)
TWENTY_THIRD = ("servegen-m-large-d7-midday", "servegen-m-large-d13-late", "servegen-m-small-d3-am")
TWENTY_FOURTH = (
    "servegen-m-large-d9-early",
    "servegen-m-large-d9-late",
    "servegen-m-small-d11-night",
)
TWENTY_FIFTH = (
    "servegen-m-large-d1-midday",
    "servegen-m-large-d8-eve",
    "servegen-m-small-d12-afternoon",
)
TWENTY_SIXTH = (
    "servegen-m-large-d10-afternoon",
    "servegen-m-large-d8-midnight",
    "servegen-m-small-d10-afternoon",
)
TWENTY_SEVENTH = (
    "servegen-m-large-d8-dusk",
    "servegen-m-large-d7-night",
    "servegen-m-small-d12-noon",
)
TWENTY_EIGHTH = (
    "servegen-m-large-d14-midnight",
    "servegen-m-large-d8-noon",
    "servegen-m-small-d3-noon",
)
TWENTY_NINTH = (
    "servegen-m-large-d14-evening",
    "servegen-m-large-d9-dusk",
    "servegen-m-small-d11-dawn",
)
THIRTIETH = (
    "servegen-m-large-d14-dusk",
    "servegen-m-large-d14-afternoon",
    "servegen-m-small-d6-midday",
)
THIRTY_FIRST = (
    "servegen-m-large-d14-late",
    "servegen-m-large-d8-afternoon",
    "servegen-m-small-d11-morning",
)
THIRTY_SECOND = (
    "servegen-m-large-d8-evening",
    "servegen-m-large-d5-dawn",
    "servegen-m-small-d13-late",
)
THIRTY_THIRD = (
    "servegen-m-large-d8-dawn",
    "servegen-m-large-d3-late",
    "servegen-m-small-d3-morning",
)
THIRTY_FOURTH = (
    "servegen-m-large-d2-morning",
    "servegen-m-large-d9-afternoon",
    "servegen-m-small-d11-am",
)
THIRTY_FIFTH = (
    "servegen-m-large-d11-midday",
    "servegen-m-large-d4-midnight",
    "servegen-m-small-d13-evening",
)
THIRTY_SIXTH = (
    "servegen-m-large-d7-evening",
    "servegen-m-large-d11-midnight",
    "servegen-m-small-d12-morning",
)
THIRTY_SEVENTH = (
    "servegen-m-large-d9-morning",
    "servegen-m-large-d10-evening",
    "servegen-m-small-d14-morning",
)
THIRTY_EIGHTH = (
    "servegen-m-large-d11-evening",
    "servegen-m-large-d4-night",
    "servegen-m-small-d6-noon",
)
THIRTY_NINTH = (
    "servegen-m-large-d12-night",
    "servegen-m-large-d2-pm",
    "servegen-m-small-d14-night",
)
FORTIETH = (
    "servegen-m-large-d13-night",
    "servegen-m-large-d12-early",
    "servegen-m-small-d2-late",
)
FORTY_FIRST = (
    "servegen-m-large-d12-noon",
    "servegen-m-large-d11-afternoon",
    "servegen-m-small-d9-late",
)
FORTY_SECOND = (
    "servegen-m-large-d10-midday",
    "servegen-m-large-d13-dawn",
    "servegen-m-small-d14-early",
)


@pytest.mark.parametrize(
    ("chosen", "later"),
    [
        (FOURTEENTH, FIFTEENTH),
        (FIFTEENTH, ()),
        (SIXTEENTH, SEVENTEENTH),
        (SEVENTEENTH, EIGHTEENTH),
        (EIGHTEENTH, NINETEENTH),
        (NINETEENTH, TWENTIETH),
        (TWENTIETH, TWENTY_FIRST),
        (TWENTY_FIRST, TWENTY_SECOND),
        (TWENTY_SECOND, TWENTY_THIRD),
        (TWENTY_THIRD, TWENTY_FOURTH),
        (TWENTY_FOURTH, TWENTY_FIFTH),
        (TWENTY_FIFTH, TWENTY_SIXTH),
        (TWENTY_SIXTH, TWENTY_SEVENTH),
        (TWENTY_SEVENTH, TWENTY_EIGHTH),
        (TWENTY_EIGHTH, TWENTY_NINTH),
        (TWENTY_NINTH, THIRTIETH),
        (THIRTIETH, THIRTY_FIRST),
        (THIRTY_FIRST, THIRTY_SECOND),
        (THIRTY_SECOND, THIRTY_THIRD),
        (THIRTY_THIRD, THIRTY_FOURTH),
        (THIRTY_FOURTH, THIRTY_FIFTH),
        (THIRTY_FIFTH, THIRTY_SIXTH),
        (THIRTY_SIXTH, THIRTY_SEVENTH),
        (THIRTY_SEVENTH, THIRTY_EIGHTH),
        (THIRTY_EIGHTH, THIRTY_NINTH),
        (THIRTY_NINTH, FORTIETH),
        (FORTIETH, FORTY_FIRST),
        (FORTY_FIRST, FORTY_SECOND),
        (FORTY_SECOND, ()),
    ],
    ids=[
        "14th",
        "15th",
        "16th (script)",
        "17th (script)",
        "18th (script)",
        "19th (script)",
        "20th (script)",
        "21st (script)",
        "22nd (script)",
        "23rd (script)",
        "24th (script)",
        "25th (script)",
        "26th (script)",
        "27th (script)",
        "28th (script)",
        "29th (script)",
        "30th (script)",
        "31st (script)",
        "32nd (script)",
        "33rd (script)",
        "34th (script)",
        "35th (script)",
        "36th (script)",
        "37th (script)",
        "38th (script)",
        "39th (script)",
        "40th (script)",
        "41st (script)",
        "42nd (script)",
    ],
)
def test_the_script_reproduces_the_hand_run_splits(
    chosen: tuple[str, ...], later: tuple[str, ...]
) -> None:
    by_name = {c.name: c for c in CASES}
    picked = holdout.next_held_out(as_if_free=chosen + later)
    assert [(s.file, s.start_s) for s in picked] == [
        (by_name[n].file, by_name[n].start_s) for n in chosen
    ]


def test_a_chosen_window_overlaps_no_case_and_holds_no_gap() -> None:
    for s in holdout.next_held_out():
        assert all(v > 0 for v in s.rates) and len(s.rates) == 9
        for c in CASES:
            if c.file == s.file:
                end = c.start_s + (c.duration_s or 0.0)
                assert not (s.start_s < end and c.start_s < s.start_s + holdout.WINDOW_S)


def test_a_gap_row_rules_a_window_out() -> None:
    rows = {600.0 * k: 100.0 for k in range(30)}
    rows[600.0 * 12] = 500.0  # the widest swing, but next to a gap
    rows[600.0 * 14] = 0.0
    rows[600.0 * 25] = 300.0
    (chosen,) = holdout.choose("f", 1, rows, used=())
    assert 0.0 not in chosen.rates
    assert chosen.swing_rps == 200.0
