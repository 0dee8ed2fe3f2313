"""helpers.debugging: reading a tlparse report and compile_times() into the same stages."""

from __future__ import annotations

import json

import pytest

from helpers.debugging import (
    STAGES,
    ReportFrames,
    compile_times_seconds,
    find_tlparse,
    report_frames,
    run_tlparse,
    span_seconds,
    stage_seconds,
    stages_from_spans,
)


def test_span_seconds_pairs_begin_and_end_per_thread():
    events = [
        {"name": "a", "ph": "B", "ts": 0, "pid": 0, "tid": 0},
        {"name": "a", "ph": "B", "ts": 0, "pid": 0, "tid": 1},
        {"name": "a", "ph": "E", "ts": 1_000_000, "pid": 0, "tid": 0},
        {"name": "a", "ph": "E", "ts": 3_000_000, "pid": 0, "tid": 1},
        {"name": "b", "ph": "X", "ts": 0, "dur": 500_000},
        {"name": "c", "ph": "i", "ts": 0},
    ]
    assert span_seconds(events) == {"a": 4.0, "b": 0.5}
    with pytest.raises(ValueError, match="events"):
        span_seconds("not a list")


def test_both_namings_give_the_same_stages():
    trace = {"entire_frame_compile": 10, "backend_compile": 8, "inductor_compile": 7, "async_compile.wait": 4}
    counters = {
        "_compile.compile_inner": 10,
        "OutputGraph.call_user_compiler": 8,
        "compile_fx_inner": 7,
        "async_compile.wait": 4,
    }
    assert stages_from_spans(trace) == stages_from_spans(counters)
    assert set(stages_from_spans(trace)) == {*STAGES, "total"}
    # no Inductor (a backend without code generation): everything after Dynamo is AOTAutograd
    assert stages_from_spans({"entire_frame_compile": 2, "backend_compile": 1})["aot_autograd"] == 1.0
    with pytest.raises(ValueError, match="spans"):
        stages_from_spans([("a", 1)])


def test_compile_times_seconds():
    assert compile_times_seconds((["x", "y"], ["0.5, 0.25", ""])) == {"x": 0.75, "y": 0.0}
    with pytest.raises(ValueError, match="names but"):
        compile_times_seconds((["x"], []))
    with pytest.raises(ValueError, match="table"):
        compile_times_seconds("x")


def _write_report(folder, records, events=()):
    lines = [json.dumps({"compilation_metrics": record}) for record in records]
    (folder / "raw.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "chromium_events.json").write_text(json.dumps(list(events)), encoding="utf-8")
    return folder


def test_report_frames_counts_like_compile_counts(tmp_path):
    report = _write_report(
        tmp_path,
        [
            {"co_name": "forward", "compile_id": "0/0"},
            {"co_name": "torch_dynamo_resume_in_forward_at_12", "compile_id": "1/0"},
            {"co_name": "forward", "compile_id": "0/1", "recompile_reason": "size mismatch"},
            {"co_name": None, "compile_id": "0/0", "is_forward": False},  # a backward record
            {"co_name": "forward", "compile_id": "0/2", "fail_type": "RecompileLimitExceeded"},
        ],
        [{"name": "entire_frame_compile", "ph": "X", "ts": 0, "dur": 2_000_000}],
    )
    assert report_frames(report) == ReportFrames(frames=3, graph_breaks=1, recompilations=1)
    assert stage_seconds(report)["total"] == 2.0
    with pytest.raises(ValueError, match="raw.jsonl"):
        report_frames(tmp_path / "none")
    with pytest.raises(ValueError, match="chromium_events.json"):
        stage_seconds(tmp_path / "none")


def test_run_tlparse_names_bad_folders(tmp_path):
    with pytest.raises(ValueError, match="trace_dir must be a folder"):
        run_tlparse(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ValueError, match="exactly one trace log"):
        run_tlparse(tmp_path, tmp_path / "out")
    found = find_tlparse()
    assert found is None or "tlparse" in found
