"""Conditions keep their transition time unless the status changes, and keep other writers'."""

from __future__ import annotations

from modelscale.control import conditions
from modelscale.control.conditions import condition

T0 = 1_700_000_000.0


def test_transition_time_moves_only_on_status_change() -> None:
    first = conditions.merge(
        [], [condition("Available", "False", "Starting", "0 of 1")], now=T0, generation=1
    )
    same = conditions.merge(
        first, [condition("Available", "False", "Starting", "0 of 2")], now=T0 + 60, generation=2
    )
    flipped = conditions.merge(
        same, [condition("Available", "True", "Ready", "1 of 1")], now=T0 + 120, generation=2
    )
    assert same[0].last_transition_time == first[0].last_transition_time
    assert same[0].message == "0 of 2" and same[0].observed_generation == 2
    assert flipped[0].last_transition_time != first[0].last_transition_time


def test_conditions_of_other_writers_are_kept_in_a_stable_order() -> None:
    mine = conditions.merge(
        [], [condition("ScalingActive", "True", "Active", "ok")], now=T0, generation=1
    )
    merged = conditions.merge(
        mine,
        [condition("Degraded", "False", "AsExpected", ""), condition("Available", "True", "R", "")],
        now=T0,
        generation=1,
    )
    assert [c.type for c in merged] == ["Available", "Degraded", "ScalingActive"]
