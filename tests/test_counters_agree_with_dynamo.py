"""CompileCounts against Dynamo's own records (issue 26): the breaks `torch._dynamo.explain`
reports, and counts that do not move with the state of the Inductor cache."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from helpers.cache import run_compile_in_fresh_process
from helpers.counters import CompileCounts


def data_dependent_branch(a, b):  # the official torch.compile tutorial's `bar`
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def a_print(x):
    y = x * 2
    print("between two ops")
    return y + 1


def an_item(x):
    return x * x.sum().item()


def an_unsupported_call(x):
    y = torch.sin(x)
    torch._dynamo.graph_break()
    return torch.cos(y)


def two_breaks(x):
    x = x + 1
    print("one")
    x = x * 2
    print("two")
    return x - 1


def inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("inside a context manager")
        y = y + 1
    return y


def _breaks_in_a_callee(x):
    x = x + 1
    print("in the callee")
    return x * 2


def a_break_in_a_nested_call(x):
    return torch.cos(_breaks_in_a_callee(torch.sin(x)))


def clean(x):
    return torch.sin(x) + 1


CASES = {
    "data-dependent branch": (data_dependent_branch, (torch.randn(4), torch.full((4,), -1.0))),
    "print": (a_print, (torch.randn(4),)),
    ".item()": (an_item, (torch.randn(4),)),
    "unsupported call": (an_unsupported_call, (torch.randn(4),)),
    "two breaks": (two_breaks, (torch.randn(4),)),
    "break inside a with block": (inside_no_grad, (torch.randn(4),)),
    "break in a nested call": (a_break_in_a_nested_call, (torch.randn(4),)),
    "clean": (clean, (torch.randn(4),)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_graph_breaks_agree_with_explain(name):
    fn, args = CASES[name]
    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()):
        explained = torch._dynamo.explain(fn)(*args)
    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()), CompileCounts() as counts:
        torch.compile(fn, backend="eager")(*args)
    torch._dynamo.reset()
    assert counts.graphs == explained.graph_count
    # explain's break_reasons: one per graph that ended at a break. Its graph_break_count is
    # graph_count - 1 (torch/_dynamo/eval_frame.py), which for a nested call also counts the
    # callee's own frame entry as a break.
    assert counts.graph_breaks == len(explained.break_reasons) > 0 or name == "clean"
    assert counts.graph_breaks == explained.graph_break_count or name == "break in a nested call"


def test_graph_breaks_under_fullgraph_are_an_error_not_a_count():
    torch._dynamo.reset()
    with CompileCounts() as counts, pytest.raises(torch._dynamo.exc.Unsupported):
        with contextlib.redirect_stdout(io.StringIO()):
            torch.compile(a_print, backend="eager", fullgraph=True)(torch.randn(4))
    torch._dynamo.reset()
    assert (counts.frames, counts.graphs, counts.graph_breaks) == (0, 0, 0)
    with CompileCounts() as counts:
        torch.compile(clean, backend="eager", fullgraph=True)(torch.randn(4))
    torch._dynamo.reset()
    assert (counts.frames, counts.graphs, counts.graph_breaks) == (1, 1, 0)


FORWARD_AND_BACKWARD = """
import torch
from helpers.cache import emit_result
from helpers.counters import CompileCounts

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
compiled = torch.compile(model)
with CompileCounts() as counts:
    compiled(torch.randn(4, 8)).sum().backward()
emit_result(counts.as_dict())
"""


def test_counts_are_the_same_with_a_cold_and_a_warm_cache(tmp_path):
    from helpers.guard import compile_support

    if not compile_support("cpu").ok:
        pytest.skip(f"needs Inductor: {compile_support('cpu').reason}")
    cold = run_compile_in_fresh_process(FORWARD_AND_BACKWARD, cache_dir=tmp_path)
    warm = run_compile_in_fresh_process(FORWARD_AND_BACKWARD, cache_dir=tmp_path)
    assert cold["autograd_cache_misses"] >= 1 and warm["autograd_cache_hits"] >= 1, (cold, warm)
    structure = ("frames", "graphs", "graph_breaks", "recompilations")
    assert (
        {k: cold[k] for k in structure}
        == {k: warm[k] for k in structure}
        == {
            "frames": 1,
            "graphs": 1,
            "graph_breaks": 0,
            "recompilations": 0,
        }
    )
