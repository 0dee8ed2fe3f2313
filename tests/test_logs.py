"""captured_log keeps torch's log records off stderr, generated_code keeps Inductor's programs,
without_paths cuts machine paths."""

from __future__ import annotations

import logging
import os

import pytest
import torch
from torch._inductor.utils import fresh_cache

from helpers.guard import compile_support
from helpers.logs import OUTPUT_CODE_LOGGER, autotune_results, captured_log, generated_code, without_paths


def test_captures_a_real_dynamo_log_and_keeps_it_off_stderr(capsys):
    def broken(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    torch._logging.set_logs(graph_breaks=True)
    try:
        loggers = [f"torch._dynamo.{m}.__graph_breaks" for m in ("symbolic_convert", "convert_frame", "exc")]
        with captured_log(*loggers) as records:
            torch._dynamo.reset()
            torch.compile(broken, backend="eager")(torch.ones(2))
    finally:
        torch._logging.set_logs()
        torch._dynamo.reset()
    assert records and "graph_break" in "".join(records).lower().replace(" ", "_")
    assert "Graph break" not in capsys.readouterr().err


def test_filters_are_removed_after_the_block():
    logger = logging.getLogger("course.test")
    with captured_log("course.test"):
        pass
    assert not logger.filters


@pytest.mark.parametrize("bad", [(), ("",), (3,)])
def test_names_are_checked(bad):
    with pytest.raises(ValueError, match="names must be"):
        with captured_log(*bad):
            pass


def test_without_paths():
    assert without_paths("at /work/main/.venv/lib/torch/x.py:3 and /tmp/a/b.py") == "at x.py:3 and b.py"
    with pytest.raises(TypeError, match="text must be a str"):
        without_paths(None)


def test_native_stderr_discarded_hides_file_descriptor_2_inside_the_block_only():
    import subprocess
    import sys

    script = (
        "import os\n"
        "from helpers.logs import native_stderr_discarded\n"
        "with native_stderr_discarded():\n"
        "    os.write(2, b'inside\\n')\n"
        "os.write(2, b'after\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stderr == "after\n"


needs_inductor = pytest.mark.skipif(not compile_support("cpu").ok, reason="Inductor cannot build C++ here")


@needs_inductor
def test_generated_code_keeps_one_program_per_graph_also_from_the_cache(capsys):
    def broken(x):
        x = x.cos() * 2
        torch._dynamo.graph_break()
        return x.exp() + 1

    with fresh_cache():
        for source in ("compiled", "from the cache"):
            torch._dynamo.reset()
            with generated_code() as programs:
                torch.compile(broken)(torch.ones(8))
            assert len(programs) == 2, source
            assert all("def call(" in program for program in programs), source
    torch._dynamo.reset()
    assert "Output code" not in capsys.readouterr().err
    assert not logging.getLogger(OUTPUT_CODE_LOGGER).isEnabledFor(logging.DEBUG)  # set back


def test_generated_code_says_when_torch_logs_keeps_the_log_off():
    import subprocess
    import sys

    script = "from helpers.logs import generated_code\nwith generated_code():\n    pass\n"
    env = {**os.environ, "TORCH_LOGS": "graph_breaks"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode != 0
    assert "add output_code to TORCH_LOGS or unset it" in done.stderr


def test_autotune_results_reads_each_table_and_its_choice():
    text = "\n".join([
        "AUTOTUNE _weight_int8pack_mm(1x1024, 4096x1024, 4096)",
        "strides: [0, 1], [1024, 1], [1]",
        "dtypes: torch.bfloat16, torch.int8, torch.bfloat16",
        "  _weight_int8pack_mm 0.0988 ms 100.0% ",
        "  cpp_CppMicroGemmFP32Vec_2 0.1292 ms 76.5% ",
        "SingleProcess AUTOTUNE benchmarking takes 3.0342 seconds and 0.0003 seconds precompiling",
        "Autotune Choices Stats:",
        '{"num_choices": 2, "best_kernel": "_weight_int8pack_mm"}',
        "AUTOTUNE mm(1x64, 64x64)",
        "  cpp_CppMicroGemmFP32Vec_0 0.0100 ms 100.0% ",
        "  mm 0.0300 ms 33.3% ",
        "  triton_mm_1 inf ms 0.0% ",  # a choice that failed to run
    ])  # fmt: skip
    first, second = autotune_results(text)
    assert (first.operation, first.sizes, first.chosen) == (
        "_weight_int8pack_mm", "1x1024, 4096x1024, 4096", "_weight_int8pack_mm"
    )  # fmt: skip
    assert first.timings == {"_weight_int8pack_mm": 0.0988, "cpp_CppMicroGemmFP32Vec_2": 0.1292}
    assert second.chosen == "cpp_CppMicroGemmFP32Vec_0"
    assert list(second.timings) == ["cpp_CppMicroGemmFP32Vec_0", "mm"]  # the failed choice left out
    assert autotune_results("no tables here\n") == []
    with pytest.raises(TypeError, match="stderr_text must be the captured text"):
        autotune_results(None)
