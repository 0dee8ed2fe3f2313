"""Notebook 05's exercise checks accept the right answers and reject realistic wrong ones.

Each check compiles with Inductor in a fresh cache directory of its own (a few seconds).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest
import torch
from torch._inductor.codecache import PyCodeCache
from torch._inductor.runtime.cache_dir_utils import cache_dir
from torch._inductor.utils import clear_inductor_caches

from helpers.exercises.nb05 import activation, check_forget, check_refactor
from helpers.guard import compile_support

pytestmark = pytest.mark.skipif(not compile_support("cpu"), reason="needs Inductor's C++ kernels")


def test_unanswered_and_bad_input():
    assert check_refactor(None) == "Exercise 1: not answered yet."
    assert check_forget(None) == "Exercise 2: not answered yet."
    with pytest.raises(TypeError, match="candidate"):
        check_refactor("tanh")
    with pytest.raises(TypeError, match="forget"):
        check_forget(42)


def refactored(values):
    # A comment, another argument name, a local variable: none of it reaches the graph.
    squashed = torch.tanh(values)
    return squashed * 0.5 + 0.5


def as_sigmoid(x):  # the same values (tanh(x)/2 + 1/2 == sigmoid(2x)), other operations
    return torch.sigmoid(2 * x)


def other_constant(x):
    return torch.tanh(x) * 0.5 + 0.6


def renamed_only(x):  # the body of activation, under another name
    return torch.tanh(x) * 0.5 + 0.5


def calls_activation(values):  # a wrapper: its graph is activation's by construction
    return activation(values)


def test_exercise_1_right_answer():
    assert check_refactor(refactored).startswith("Exercise 1: correct")


class ActivationCaller:
    """A callable object: no body of its own to refactor."""

    def __call__(self, x):
        return activation(x)


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        (activation, "same body"),
        (renamed_only, "same body"),
        (torch.compile(activation), "same body"),  # "compile it" is not a rewrite
        (calls_activation, "calls activation"),
        (as_sigmoid, "FX graph cache had 0 hit"),
        (other_constant, "other values"),
        (functools.partial(activation), "not a function with its own body"),  # review: no __code__
        (ActivationCaller(), "not a function with its own body"),
        (lambda x, f=activation: f(x), "calls activation"),  # review: a wrapper through a default
    ],
)
def test_exercise_1_wrong_answers(candidate, message):
    with pytest.raises(AssertionError, match=message):
        check_refactor(candidate)


def reset_and_clear_python_modules():  # review: the C++ kernel library stays loaded
    torch.compiler.reset()
    PyCodeCache.cache_clear()


def forget_everything():
    torch.compiler.reset()
    clear_inductor_caches()


def forget_and_wipe_the_disk():  # "to be sure": deletes the entry the next compile could load
    forget_everything()
    shutil.rmtree(Path(cache_dir()) / "fxgraph", ignore_errors=True)


def test_exercise_2_right_answer():
    assert check_forget(forget_everything).startswith("Exercise 2: correct")


@pytest.mark.parametrize(
    ("forget", "message"),
    [
        (lambda: None, "reused the code"),
        (torch.compiler.reset, "still in memory"),  # finding 21: reset() clears Dynamo only
        (clear_inductor_caches, "reused the code"),
        (forget_and_wipe_the_disk, "0 hit"),
        (reset_and_clear_python_modules, "still in memory"),
    ],
)
def test_exercise_2_wrong_answers(forget, message):
    with pytest.raises(AssertionError, match=message):
        check_forget(forget)
