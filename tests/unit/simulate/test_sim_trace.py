"""Trace loading: both formats, slicing, rate scaling, and errors a user can act on."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from modelscale.simulate import trace

PER_REQUEST = "t_s,input_tokens,output_tokens\n0.0,100,10\n2.5,200,20\n1.0,50,5\n9.0,10,1\n"
AGGREGATE = (
    "window_start_s,total_rps,active_clients,covered_rps,mean_input_tokens,mean_output_tokens\n"
    "0,2.0,3,1.0,300,100\n600,4.0,3,1.0,200,50\n1200,0.0,0,0.0,,\n"
)


def write(tmp_path: Path, name: str, text: str, *, gz: bool) -> Path:
    path = tmp_path / name
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [pytest.param(False, id="plain"), pytest.param(True, id="gzip")])
def test_per_request_trace_is_sorted_with_its_tokens(tmp_path: Path, gz: bool) -> None:
    tr = trace.load(write(tmp_path, "t.csv.gz" if gz else "t.csv", PER_REQUEST, gz=gz))
    assert tr.arrival_s.tolist() == [0.0, 1.0, 2.5, 9.0]
    assert tr.input_tokens.tolist() == [100, 50, 200, 10]
    assert tr.output_tokens.tolist() == [10, 5, 20, 1]


@pytest.mark.parametrize(
    ("start", "duration", "arrivals"),
    [
        pytest.param(0.0, None, [0.0, 1.0, 2.5, 9.0], id="whole"),
        pytest.param(1.0, 2.0, [0.0, 1.5], id="slice-rebased"),
        pytest.param(0.0, 2.0, [0.0, 1.0], id="head"),
    ],
)
def test_per_request_slice(
    tmp_path: Path, start: float, duration: float | None, arrivals: list[float]
) -> None:
    tr = trace.load(
        write(tmp_path, "t.csv", PER_REQUEST, gz=False), start_s=start, duration_s=duration
    )
    assert tr.arrival_s.tolist() == arrivals


@pytest.mark.parametrize(
    ("scale", "expected"),
    [pytest.param(2.0, 8, id="superpose-two-copies"), pytest.param(3.0, 12, id="three-copies")],
)
def test_per_request_rate_scale_superposes_copies(
    tmp_path: Path, scale: float, expected: int
) -> None:
    tr = trace.load(write(tmp_path, "t.csv", PER_REQUEST, gz=False), rate_scale=scale)
    assert tr.requests == expected
    assert np.all(np.diff(tr.arrival_s) >= 0)


def test_aggregate_replays_seeded_poisson_arrivals(tmp_path: Path) -> None:
    path = write(tmp_path, "agg.csv.gz", AGGREGATE, gz=True)
    a = trace.load(path, seed=7, rate_scale=10.0)
    b = trace.load(path, seed=7, rate_scale=10.0)
    c = trace.load(path, seed=8, rate_scale=10.0)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    first = a.arrival_s < 600
    second = (a.arrival_s >= 600) & (a.arrival_s < 1200)
    # 20 req/s and 40 req/s over 600 s: Poisson counts within a few standard deviations.
    assert abs(first.sum() - 12000) < 600
    assert abs(second.sum() - 24000) < 900
    assert not np.any(a.arrival_s >= 1200)  # the empty window stays empty
    assert abs(a.input_tokens[first].mean() - 300) < 15
    assert abs(a.output_tokens[second].mean() - 50) < 3


def test_aggregate_slice(tmp_path: Path) -> None:
    tr = trace.load(write(tmp_path, "agg.csv", AGGREGATE, gz=False), start_s=600, duration_s=300)
    assert tr.duration_s == 300
    assert tr.requests > 0
    assert tr.arrival_s.min() >= 0 and tr.arrival_s.max() < 300


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        pytest.param(None, {}, "not found", id="missing-file"),
        pytest.param("a,b,c\n1,2,3\n", {}, "expected per-request columns", id="unknown-columns"),
        pytest.param("t_s,input_tokens,output_tokens\n", {}, "no data rows", id="empty"),
        pytest.param("t_s,input_tokens,output_tokens\n1,x,3\n", {}, "non-numeric", id="bad-cell"),
        pytest.param("t_s,input_tokens,output_tokens\n1,-2,3\n", {}, "negative", id="negative"),
        pytest.param(PER_REQUEST, {"start_s": 100.0}, "select nothing", id="empty-slice"),
        pytest.param(PER_REQUEST, {"rate_scale": 0.0}, "--rate-scale", id="zero-rate-scale"),
    ],
)
def test_bad_traces_say_what_to_fix(
    tmp_path: Path, text: str | None, kwargs: dict[str, float], message: str
) -> None:
    path = tmp_path / "t.csv"
    if text is not None:
        path.write_text(text)
    with pytest.raises(trace.TraceError, match=message):
        trace.load(path, **kwargs)  # type: ignore[arg-type]


def test_stream_gives_the_same_requests_as_load_in_bounded_chunks(tmp_path: Path) -> None:
    path = write(tmp_path, "agg.csv.gz", AGGREGATE, gz=True)
    src = trace.stream(path, seed=7, rate_scale=10.0, start_s=300, duration_s=900)
    assert isinstance(src, trace.TraceStream)
    chunks = list(src.chunks())
    assert all(c.arrival_s.max() - c.arrival_s.min() < trace.CHUNK_S for c in chunks)
    loaded = trace.load(path, seed=7, rate_scale=10.0, start_s=300, duration_s=900)
    assert np.array_equal(np.concatenate([c.arrival_s for c in chunks]), loaded.arrival_s)
    assert np.array_equal(np.concatenate([c.input_tokens for c in chunks]), loaded.input_tokens)
    assert np.all(np.diff(loaded.arrival_s) >= 0)
    assert loaded.duration_s == 900 and loaded.arrival_s.max() < 900
    # Expected count: 300 s at 20 req/s + 600 s at 40 req/s (rate x10).
    assert src.expected_requests == pytest.approx(30_000)
    assert abs(loaded.requests - 30_000) < 800


def test_aggregate_gaps_are_reported(tmp_path: Path) -> None:
    tr = trace.load(write(tmp_path, "agg.csv", AGGREGATE, gz=False))
    assert tr.gaps == (trace.Gap(1200.0, 1800.0),)  # the window with no requests
    sliced = trace.load(write(tmp_path, "agg.csv", AGGREGATE, gz=False), duration_s=900)
    assert sliced.gaps == ()


def test_per_request_cached_tokens_column_is_read(tmp_path: Path) -> None:
    text = "t_s,input_tokens,output_tokens,cached_tokens\n0.0,100,10,64\n1.0,50,5,80\n"
    tr = trace.load(write(tmp_path, "t.csv", text, gz=False))
    assert tr.cached_tokens is not None
    # A hit never covers the whole prompt: at least one token is computed.
    assert tr.cached_tokens.tolist() == [64, 49]
    plain = trace.load(write(tmp_path, "p.csv", PER_REQUEST, gz=False))
    assert plain.cached_tokens is None


def test_aggregate_windows_are_the_series_itself_sorted(tmp_path: Path) -> None:
    # Rows out of order and an empty token mean (ServeGen leaves it empty without traffic).
    text = (
        "window_start_s,total_rps,active_clients,covered_rps,mean_input_tokens,mean_output_tokens\n"
        "600,2.0,1,2.0,300,40\n"
        "0,1.0,1,1.0,,\n"
    )
    windows = trace.aggregate_windows(write(tmp_path, "agg.csv.gz", text, gz=True))
    assert windows.tolist() == [[0.0, 1.0, 0.0, 0.0], [600.0, 2.0, 300.0, 40.0]]


def test_aggregate_windows_refuses_a_per_request_trace(tmp_path: Path) -> None:
    with pytest.raises(trace.TraceError, match="an aggregate trace has window_start_s"):
        trace.aggregate_windows(write(tmp_path, "t.csv", PER_REQUEST, gz=False))


# Three windows at 10, 40, 10 req/s, then an empty one: a 4x step at 600 s and back at
# 1200 s when replayed as steps.
STEPS = (
    "window_start_s,total_rps,active_clients,covered_rps,mean_input_tokens,mean_output_tokens\n"
    "0,10.0,3,1.0,300,100\n600,40.0,3,1.0,300,100\n1200,10.0,3,1.0,300,100\n"
    "1800,0.0,0,0.0,,\n"
)


def per_minute(tr: trace.Trace) -> list[float]:
    counts = np.bincount((tr.arrival_s // 60).astype(int), minlength=int(tr.duration_s // 60))
    return (counts / 60.0).tolist()


def test_smooth_moves_the_rate_between_window_centres_instead_of_stepping(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "s.csv", STEPS, gz=False)
    stepped = per_minute(trace.load(path, seed=1))
    smooth = per_minute(trace.load(path, seed=1, smooth=True))
    # As steps: the minutes either side of 600 s differ 4x.
    assert stepped[9] < 13 and stepped[10] > 35
    # Smooth: about 25/s either side of the boundary (halfway between 10 and 40), the
    # window's own rate at its centre, and no ramp into the empty window at the end.
    assert 20 < smooth[9] < 30 and 20 < smooth[10] < 30
    assert smooth[14] > 35 and smooth[4] < 13
    assert 6 < smooth[29] < 14 and sum(smooth[30:]) == 0
    # The series' requests are kept: the ramps up and down cancel.
    src = trace.stream(path, seed=1, smooth=True)
    assert isinstance(src, trace.TraceStream)
    assert src.expected_requests == pytest.approx(600 * (10 + 40 + 10))
    assert trace.load(path, seed=1, smooth=True).arrival_s.tolist() == (
        trace.load(path, seed=1, smooth=True).arrival_s.tolist()
    )


def test_smooth_is_refused_for_a_per_request_trace(tmp_path: Path) -> None:
    with pytest.raises(trace.TraceError, match="--smooth applies to aggregate traces"):
        trace.load(write(tmp_path, "t.csv", PER_REQUEST, gz=False), smooth=True)
