"""Tests for helpers.cache: fresh-process runs, result parsing, counters, phases, directory summary."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from helpers.cache import (
    CACHE_ENV_VARS,
    PHASES,
    RESULT_PREFIX,
    ChildCrashed,
    child_env,
    compile_phases,
    describe_cache_dir,
    emit_result,
    interleaved_starts,
    parse_result,
    run_compile_in_fresh_process,
    size_on_disk,
)

ECHO = """
import json, os, sys
from helpers.cache import emit_result
emit_result({"args": json.loads(sys.argv[1]), "cache_dir": os.environ["TORCHINDUCTOR_CACHE_DIR"],
             "extra": os.environ.get("COURSE_TEST_VARIABLE"), "python": sys.executable})
"""


def test_child_sees_its_cache_dir_args_and_env(tmp_path):
    result = run_compile_in_fresh_process(
        ECHO, cache_dir=tmp_path, args={"n": 3}, env={"COURSE_TEST_VARIABLE": "yes"}
    )
    assert result["args"] == {"n": 3}
    assert Path(result["cache_dir"]) == tmp_path.resolve()
    assert result["extra"] == "yes"
    assert Path(result["python"]).name == Path(sys.executable).name
    assert result["process_s"] > 0


def test_child_does_not_inherit_cache_variables(tmp_path, monkeypatch):
    for name in CACHE_ENV_VARS:
        monkeypatch.setenv(name, "1")
    probe = (
        "import os; from helpers.cache import CACHE_ENV_VARS, emit_result; "
        "emit_result({name: os.environ.get(name) for name in CACHE_ENV_VARS})"
    )
    result = run_compile_in_fresh_process(
        probe, cache_dir=tmp_path, env={"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    )
    del result["process_s"]
    # Nothing inherited; what env= passes on purpose arrives.
    assert result == {**dict.fromkeys(CACHE_ENV_VARS), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}


def test_script_can_be_a_path(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(ECHO, encoding="utf-8")
    cache = tmp_path / "cache"
    cache.mkdir()
    assert run_compile_in_fresh_process(script, cache_dir=cache)["args"] == {}


def test_child_failure_raises_with_its_stderr(tmp_path):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        run_compile_in_fresh_process("1 / 0", cache_dir=tmp_path)


def test_child_killed_by_a_signal_raises_child_crashed_with_its_python_stack(tmp_path):
    crash = "import ctypes\n\n\ndef load():\n    ctypes.string_at(0)\n\n\nload()\n"  # reads address 0
    with pytest.raises(ChildCrashed) as caught:
        run_compile_in_fresh_process(crash, cache_dir=tmp_path)
    assert caught.value.signal_name == "SIGSEGV"
    message = str(caught.value)
    assert message.startswith("the child process was killed by SIGSEGV (signal 11), in:")
    assert "line 5 in load" in message and "Extension modules" not in message
    assert isinstance(caught.value, RuntimeError)  # callers that catch RuntimeError still do


def test_child_without_result_raises(tmp_path):
    with pytest.raises(RuntimeError, match="emit_result"):
        run_compile_in_fresh_process("print('hello')", cache_dir=tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"script": ""}, "script"),
        ({"script": Path("/no/such/script.py")}, "script"),
        ({"cache_dir": "/no/such/directory"}, "cache_dir"),
        ({"args": [1, 2]}, "args"),
        ({"env": {"A": 1}}, "env"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_bad_arguments_name_the_argument(tmp_path, kwargs, argument):
    call = {"script": "pass", "cache_dir": tmp_path, **kwargs}
    with pytest.raises(ValueError, match=argument):
        run_compile_in_fresh_process(call.pop("script"), **call)


def test_emit_and_parse_round_trip(capsys):
    emit_result({"hits": 2, "name": "warm"})
    printed = capsys.readouterr().out
    assert printed.startswith(RESULT_PREFIX)
    assert parse_result("log line\n" + printed) == {"hits": 2, "name": "warm"}


def test_parse_takes_the_last_result_and_rejects_none():
    text = f'{RESULT_PREFIX}{{"a": 1}}\n{RESULT_PREFIX}{{"a": 2}}\n'
    assert parse_result(text) == {"a": 2}
    with pytest.raises(ValueError, match="emit_result"):
        parse_result("no result here")
    with pytest.raises(ValueError, match="result"):
        emit_result([1, 2])


def test_child_env_drops_adds_and_makes_helpers_importable(monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    child = child_env({"COURSE_TEST_VARIABLE": "1"}, drop=CACHE_ENV_VARS)
    assert "TRITON_CACHE_DIR" not in child and child["COURSE_TEST_VARIABLE"] == "1"
    root = str(Path(__file__).resolve().parent.parent)
    assert child["PYTHONPATH"].split(os.pathsep) == [root, "/elsewhere"]
    with pytest.raises(ValueError, match="env"):
        child_env({"A": 1})
    with pytest.raises(ValueError, match="drop"):
        child_env(drop="TRITON_CACHE_DIR")


def test_compile_phases_nest_and_handle_cache_hits():
    miss = SimpleNamespace(
        entire_frame_compile_time_s=10.0,
        backend_compile_time_s=8.0,
        inductor_compile_time_s=7.0,
        triton_compile_time_us=4_000_000,
    )
    hit = SimpleNamespace(
        entire_frame_compile_time_s=3.0,
        backend_compile_time_s=1.5,
        inductor_compile_time_s=None,
        triton_compile_time_us=1_000_000,
    )
    phases = compile_phases([miss, hit])
    assert list(phases) == [*PHASES, "total_s"]
    assert phases == {
        "dynamo_s": 3.5,
        "aot_autograd_s": 1.5,
        "inductor_s": 3.0,
        "kernel_compile_s": 5.0,
        "total_s": 13.0,
    }
    assert compile_phases([])["total_s"] == 0.0
    with pytest.raises(ValueError, match="records"):
        compile_phases("not records")


def test_compile_phases_on_a_real_record():
    records_before = len(torch._dynamo.utils.get_compilation_metrics())
    torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))
    phases = compile_phases(torch._dynamo.utils.get_compilation_metrics()[records_before:])
    assert phases["total_s"] > 0
    assert phases["inductor_s"] == 0.0  # the eager backend runs no Inductor


def test_describe_cache_dir_counts_entries(tmp_path):
    (tmp_path / "fxgraph" / "ab" / "key").mkdir(parents=True)
    (tmp_path / "fxgraph" / "ab" / "key" / "entry").write_bytes(b"x" * 1000)
    (tmp_path / "aotautograd" / "key").mkdir(parents=True)
    (tmp_path / "aotautograd" / "key" / "entry").write_bytes(b"y")
    (tmp_path / "cd").mkdir()
    (tmp_path / "cd" / "kernel.so").write_bytes(b"z")
    (tmp_path / "cd" / "kernel.cpp").write_text("// source")
    summary = describe_cache_dir(tmp_path)
    assert (summary.fxgraph_entries, summary.aotautograd_entries, summary.compiled_kernels) == (1, 1, 1)
    assert summary.megabytes > 0
    with pytest.raises(ValueError, match="cache_dir"):
        describe_cache_dir(tmp_path / "missing")


def test_size_on_disk_of_a_file_and_a_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "b.bin").write_bytes(b"y" * 5)
    assert size_on_disk(tmp_path / "b.bin") == 5
    assert size_on_disk(tmp_path) == 15
    with pytest.raises(ValueError, match="path"):
        size_on_disk(tmp_path / "missing")


def test_interleaved_starts_rotate_the_order_and_collect_results():
    order = []

    def start(name):
        def run():
            order.append(name)
            return {"name": name, "n": len(order)}

        return run

    results, crashed = interleaved_starts({"a": start("a"), "b": start("b"), "c": start("c")}, rounds=3)
    assert crashed == {}
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert [r["n"] for r in results["a"]] == [1, 6, 8]
    assert list(results) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("starts", "rounds", "message"),
    [({}, 3, "starts"), ({"a": 1}, 3, "starts"), ({"a": dict}, 0, "rounds"), ({"a": dict}, True, "rounds")],
)
def test_interleaved_starts_name_the_bad_argument(starts, rounds, message):
    with pytest.raises(ValueError, match=message):
        interleaved_starts(starts, rounds=rounds)


def test_interleaved_starts_need_a_dict_from_each_start():
    with pytest.raises(TypeError, match="'a'"):
        interleaved_starts({"a": lambda: 42}, rounds=1)


def test_interleaved_starts_leave_out_a_start_allowed_to_crash_and_raise_any_other(tmp_path):
    crash = "import ctypes\nctypes.string_at(0)\n"  # reads address 0: SIGSEGV
    calls = []

    def start(name, script):
        def run():
            calls.append(name)
            return run_compile_in_fresh_process(script, cache_dir=tmp_path)

        return run

    fine = start("fine", ECHO)
    results, crashed = interleaved_starts(
        {"fine": fine, "package": start("package", crash)}, rounds=2, may_crash=["package"]
    )
    assert list(results) == ["fine"] and len(results["fine"]) == 2
    assert calls.count("package") == 1  # not started again after its crash
    assert crashed["package"].signal_name == "SIGSEGV"
    with pytest.raises(ChildCrashed):
        interleaved_starts({"fine": fine, "package": start("package", crash)}, rounds=1)
    with pytest.raises(ValueError, match="may_crash"):
        interleaved_starts({"fine": fine}, rounds=1, may_crash="fine")
    with pytest.raises(ValueError, match="may_crash"):
        interleaved_starts({"fine": fine}, rounds=1, may_crash=["package"])
