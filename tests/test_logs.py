"""captured_log keeps torch's log records off stderr; without_paths cuts machine paths."""

from __future__ import annotations

import logging

import pytest
import torch

from helpers.logs import captured_log, without_paths


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
