"""Notebook 10's exercise checks: right answers pass, realistic wrong answers are rejected."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.exercises.nb10 import (
    LADDER,
    THIRD_BUG,
    check_graph_ops,
    check_third_bug,
    noisy_layer,
    trace_graph_ops,
)


def _seeded(fn, x):
    torch._dynamo.reset()
    torch.manual_seed(1)
    return fn(x)


def test_the_third_bug_passes_the_first_three_rungs():
    # The expected answer's premise, fast: every rung below Inductor reproduces eager's numbers.
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    expected = _seeded(noisy_layer, x)
    for backend in LADDER[:3]:
        compiled = _seeded(torch.compile(noisy_layer, backend=backend), x)
        torch.testing.assert_close(compiled, expected, rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="x must be a tensor"):
        noisy_layer(3.0)


def test_exercise_1():
    assert check_third_bug({"first_backend": None, "subsystem": None}).endswith("not answered yet.")
    assert check_third_bug(dict(THIRD_BUG)) == "Exercise 1: correct."
    # a first part alone is confirmed; the second waits
    assert check_third_bug({"first_backend": "inductor", "subsystem": None}) == (
        "Exercise 1: first_backend right so far; subsystem not answered yet."
    )
    only_subsystem = {"first_backend": None, "subsystem": THIRD_BUG["subsystem"]}
    assert "subsystem right so far" in check_third_bug(only_subsystem)
    # a wrong first part alone is rejected, without waiting for the second
    with pytest.raises(AssertionError, match="wrong for 'first_backend'"):
        check_third_bug({"first_backend": "aot_eager_decomp_partition", "subsystem": None})
    # by analogy with dropout: a decomposition at fault
    with pytest.raises(AssertionError, match="Exercise 1: wrong"):
        check_third_bug({"first_backend": "aot_eager_decomp_partition", "subsystem": "decomposition"})
    # the right rung, the other bug's setting
    with pytest.raises(AssertionError, match="subsystem"):
        check_third_bug({"first_backend": "inductor", "subsystem": "inductor_emulate_precision_casts"})
    # the config field's name instead of the subsystem do_bisect returns
    with pytest.raises(AssertionError, match="subsystem"):
        check_third_bug({"first_backend": "inductor", "subsystem": "fallback_random"})
    # the subsystem right, the rung taken from the dropout bug
    with pytest.raises(AssertionError, match="first_backend"):
        wrong_rung = {"first_backend": "aot_eager_decomp_partition", "subsystem": THIRD_BUG["subsystem"]}
        check_third_bug(wrong_rung)
    # the whole result object's backend field given as the subsystem
    with pytest.raises(AssertionError, match="subsystem"):
        check_third_bug({"first_backend": "inductor", "subsystem": "inductor"})
    with pytest.raises(ValueError, match="first_backend"):
        check_third_bug({"first_backend": "cuda", "subsystem": None})
    with pytest.raises(ValueError, match="answer must be a dict"):
        check_third_bug("inductor")


def _report(tmp_path, records):
    lines = [json.dumps({"string_table": ["x.py"]})]
    lines += [json.dumps({"compilation_metrics": record}) for record in records]
    (tmp_path / "raw.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_exercise_2(tmp_path):
    report = _report(
        tmp_path,
        [{"co_name": "forward", "compile_id": "0/0", "graph_op_count": 105, "graph_node_count": 186}],
    )
    assert trace_graph_ops(report) == 105
    assert check_graph_ops(None, report).endswith("not answered yet.")
    assert check_graph_ops(105, report) == "Exercise 2: correct."
    # graph_node_count counts the inputs (placeholders) and the output too
    with pytest.raises(AssertionError, match="186 is too high"):
        check_graph_ops(186, report)
    with pytest.raises(ValueError, match="answer must be a count"):
        check_graph_ops("105", report)
    assert "skipped" in check_graph_ops(105, None)
    with pytest.raises(ValueError, match="report_dir"):
        trace_graph_ops(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "raw.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="no compilation_metrics"):
        trace_graph_ops(empty)
