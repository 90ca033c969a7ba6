"""`bench/sweep.py` writes its file so that two sweeps of different cases running at once
(e.g. the held-out cases in full beside `--only modelscale` on the tuning cases) keep each
other's cases: the file is read again under a lock before every write. Before, each wrote
the file it had read at its start, and the last writer dropped the other's cases."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import sweep  # bench/ is a scripts directory, put on the path above


def test_two_sweeps_writing_in_turn_keep_each_others_cases(tmp_path: Path) -> None:
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"old": {"v": 0}, "a": {"v": 0}}))
    # Sweep 1 (case a) and sweep 2 (case b) both started from the file above.
    sweep.merge_into(path, {"a": {"v": 1}})
    sweep.merge_into(path, {"b": {"v": 2}})
    sweep.merge_into(path, {"a": {"v": 3}})
    assert json.loads(path.read_text()) == {"old": {"v": 0}, "a": {"v": 3}, "b": {"v": 2}}


def test_a_full_sweep_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"gone": {"v": 0}}))
    assert sweep.merge_into(path, {"a": {"v": 1}}, replace=True) == {"a": {"v": 1}}
    assert json.loads(path.read_text()) == {"a": {"v": 1}}


def test_the_first_sweep_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sweep.json"
    assert sweep.merge_into(path, {"a": {"v": 1}}) == {"a": {"v": 1}}
    assert not (tmp_path / "sweep.tmp").exists()
