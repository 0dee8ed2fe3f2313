"""Read a ``TORCH_TRACE`` log with ``tlparse``: where the compile time went, which frames compiled.

``TORCH_TRACE=<folder>`` makes torch write a structured log of every compilation; ``tlparse``
(a package on the index, ``pip install tlparse``) turns it into an HTML report (``index.html``)
plus machine-readable files. This module finds the executable (:func:`find_tlparse`), runs it
(:func:`run_tlparse`), and reads two of its files: ``chromium_events.json`` (the timed spans of
each compile, :func:`stage_seconds`) and ``raw.jsonl`` (one ``compilation_metrics`` record per
frame, :func:`report_frames`). :func:`compile_times_seconds` reads the in-process instrument,
``torch._dynamo.utils.compile_times()``, into the same shape, so that both can be compared.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The stages of a first compile, in the order they run, and the spans that bound them.
STAGES = {
    "dynamo": "Dynamo: trace bytecode, build guards",
    "aot_autograd": "AOTAutograd, with Inductor's graph passes",  # backend_compile minus compile_fx_inner
    "inductor": "Inductor: lower, fuse, generate code",
    "cpp_build": "waiting for kernel builds (C++ on a CPU, Triton on a GPU)",
}

# Dynamo's frame records name a frame that resumes after a graph break so (torch/_dynamo/resume_execution.py).
_RESUME_PREFIX = "torch_dynamo_resume_in"


def find_tlparse() -> str | None:
    """The ``tlparse`` executable next to this Python (a venv's ``bin``), else on ``PATH``, else None.

    Example:
        >>> path = find_tlparse()
        >>> path is None or Path(path).name.startswith("tlparse")
        True
    """
    folder = Path(sys.executable).parent
    for name in ("tlparse", "tlparse.exe"):
        if (folder / name).is_file() and os.access(folder / name, os.X_OK):
            return str(folder / name)
    return shutil.which("tlparse")


def run_tlparse(
    trace_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, executable: str | None = None
) -> Path:
    """Run ``tlparse`` on the one log in ``trace_dir``; return ``out_dir`` (``index.html`` inside).

    Example:
        >>> run_tlparse("/no/such/folder", "/tmp/out")
        Traceback (most recent call last):
        ...
        ValueError: trace_dir must be a folder TORCH_TRACE wrote; got '/no/such/folder'
    """
    folder = Path(trace_dir)
    if not folder.is_dir():
        raise ValueError(f"trace_dir must be a folder TORCH_TRACE wrote; got {str(trace_dir)!r}")
    logs = sorted(folder.glob("*.log"))
    if len(logs) != 1:
        raise ValueError(f"trace_dir must hold exactly one trace log (one process); found {len(logs)}")
    tool = executable or find_tlparse()
    if tool is None:
        raise FileNotFoundError("tlparse is not installed: pip install tlparse")
    out = Path(out_dir)
    command = [tool, str(logs[0]), "-o", str(out), "--overwrite", "--no-browser"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode or not (out / "index.html").is_file():
        raise RuntimeError(f"tlparse failed (exit code {done.returncode}):\n{done.stderr[-2000:]}")
    return out


def span_seconds(events: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Total seconds of each named span in Chrome trace ``events`` (begin/end pairs or complete ones).

    Example:
        >>> span_seconds([{"name": "a", "ph": "B", "ts": 0}, {"name": "a", "ph": "E", "ts": 2_500_000}])
        {'a': 2.5}
    """
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
        raise ValueError("events must be a list of Chrome trace events (chromium_events.json)")
    open_spans: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    total: dict[str, float] = defaultdict(float)
    for event in events:
        key = (event.get("name"), event.get("pid"), event.get("tid"))
        phase = event.get("ph")
        if phase == "B":
            open_spans[key].append(float(event["ts"]))
        elif phase == "E" and open_spans[key]:
            total[str(event["name"])] += (float(event["ts"]) - open_spans[key].pop()) / 1e6
        elif phase == "X":
            total[str(event["name"])] += float(event.get("dur", 0)) / 1e6
    return {name: round(seconds, 6) for name, seconds in total.items()}


# Each level of the nesting, as a trace names it and as compile_times() names it (torch 2.8 to 2.15).
_NESTED_SPANS = (
    ("entire_frame_compile", "_compile.compile_inner"),
    ("backend_compile", "OutputGraph.call_user_compiler"),
    ("inductor_compile", "compile_fx_inner", "fx_codegen_and_compile"),
    ("async_compile.wait",),
)


def _first_span(spans: Mapping[str, float], names: tuple[str, ...]) -> float:
    return float(next((spans[name] for name in names if name in spans), 0.0))


def stages_from_spans(spans: Mapping[str, float]) -> dict[str, float]:
    """Split compile time into :data:`STAGES` from nested span totals (plus ``"total"``).

    The spans nest: the frame's compile holds the backend's (AOTAutograd), which holds Inductor's,
    which ends in ``async_compile.wait`` (the C++ builds still running). A trace names the outer
    three ``entire_frame_compile``, ``backend_compile``, ``inductor_compile`` (phase names);
    ``compile_times()`` names the same calls ``_compile.compile_inner``,
    ``OutputGraph.call_user_compiler``, ``compile_fx_inner`` (``dynamo_timed`` keys in
    torch/_dynamo/convert_frame.py, output_graph.py, torch/_inductor/compile_fx.py, 2.8 to 2.15):
    either set is read. Inductor's span holds the C++ builds it started while generating code
    (``compile_threads`` workers); ``async_compile.wait`` is only the wait for those still running.

    Example:
        >>> stages_from_spans({"entire_frame_compile": 10, "backend_compile": 8,
        ...                    "inductor_compile": 7, "async_compile.wait": 4})
        {'dynamo': 2.0, 'aot_autograd': 1.0, 'inductor': 3.0, 'cpp_build': 4.0, 'total': 10.0}
    """
    if not isinstance(spans, Mapping):
        raise ValueError("spans must map span names to seconds (see span_seconds)")
    whole, backend, inductor, wait = (_first_span(spans, names) for names in _NESTED_SPANS)
    stages = {
        "dynamo": max(whole - backend, 0.0),
        "aot_autograd": max(backend - inductor, 0.0),
        "inductor": max(inductor - wait, 0.0),
        "cpp_build": wait,
        "total": whole,
    }
    return {name: round(value, 6) for name, value in stages.items()}


def report_file(report_dir: str | os.PathLike[str], name: str) -> Path:
    """The file ``name`` of a tlparse report folder, or an error naming ``report_dir``.

    Example:
        >>> report_file("/no/such/report", "raw.jsonl")
        Traceback (most recent call last):
        ...
        ValueError: report_dir must be a tlparse output folder with raw.jsonl; got '/no/such/report'
    """
    path = Path(report_dir) / name
    if not path.is_file():
        raise ValueError(f"report_dir must be a tlparse output folder with {name}; got {str(report_dir)!r}")
    return path


def stage_seconds(report_dir: str | os.PathLike[str]) -> dict[str, float]:
    """Compile seconds per stage (:data:`STAGES`, plus ``"total"``) in a tlparse report folder.

    Example:
        >>> stage_seconds("/x")
        Traceback (most recent call last):
        ...
        ValueError: report_dir must be a tlparse output folder with chromium_events.json; got '/x'
    """
    path = report_file(report_dir, "chromium_events.json")
    return stages_from_spans(span_seconds(json.loads(path.read_text(encoding="utf-8"))))


def compile_times_seconds(table: tuple[Sequence[str], Sequence[str]]) -> dict[str, float]:
    """``torch._dynamo.utils.compile_times(repr="csv")`` as total seconds per span name.

    Example:
        >>> compile_times_seconds((["bytecode_tracing", "build_guards"], ["0.5, 0.25", "0.1"]))
        {'bytecode_tracing': 0.75, 'build_guards': 0.1}
    """
    if not (isinstance(table, (tuple, list)) and len(table) == 2):
        raise ValueError("table must be compile_times(repr='csv'): (names, values)")
    names, values = table
    if len(names) != len(values):
        raise ValueError(f"table has {len(names)} names but {len(values)} values")
    return {
        str(name): round(sum(float(v) for v in str(value).split(",") if v.strip()), 6)
        for name, value in zip(names, values, strict=True)
    }


@dataclass(frozen=True)
class ReportFrames:
    """What a trace says Dynamo compiled: frames, graph breaks (resume frames), recompilations.

    Example:
        >>> ReportFrames(frames=2, graph_breaks=1, recompilations=0).frames
        2
    """

    frames: int
    graph_breaks: int
    recompilations: int


def report_frames(report_dir: str | os.PathLike[str]) -> ReportFrames:
    """Count the frame records (``compilation_metrics``) in a tlparse report's ``raw.jsonl``.

    Counted as :class:`helpers.counters.CompileCounts` counts them: a frame is a forward record
    with a code name and no failure; a graph break is a frame that resumes after one; a
    recompilation is a frame whose compile id is not its frame's first (``"0/1"``).

    Example:
        >>> report_frames("/no/such/report")
        Traceback (most recent call last):
        ...
        ValueError: report_dir must be a tlparse output folder with raw.jsonl; got '/no/such/report'
    """
    path = report_file(report_dir, "raw.jsonl")
    frames = breaks = recompiles = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line).get("compilation_metrics") if line.strip() else None
        if not record or record.get("fail_type") or not record.get("co_name"):
            continue
        if record.get("is_forward") is False:
            continue
        frames += 1
        breaks += str(record["co_name"]).startswith(_RESUME_PREFIX)
        compile_id = str(record.get("compile_id", "0/0")).split("/")
        recompiles += len(compile_id) > 1 and compile_id[-1].strip("]") not in ("0", "")
    return ReportFrames(frames=frames, graph_breaks=breaks, recompilations=recompiles)
