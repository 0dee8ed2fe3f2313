"""Notebook 05's exercise checks accept the right answers and reject realistic wrong ones.

Each check compiles with Inductor in a fresh cache directory of its own (a few seconds).
"""

from __future__ import annotations

import functools
import gc
import shutil
import types
from pathlib import Path

import pytest
import torch
from torch._inductor.codecache import PyCodeCache
from torch._inductor.runtime.cache_dir_utils import cache_dir
from torch._inductor.utils import clear_inductor_caches

from helpers.exercises.nb05 import _same_code, activation, check_forget, check_refactor
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


def documented_only(x):
    """The body of activation, under another name and with another docstring."""
    return torch.tanh(x) * 0.5 + 0.5


def extra_unused_argument(x, unused=None):  # review: a new signature, the body of activation
    return torch.tanh(x) * 0.5 + 0.5


def renamed_argument(values):  # review: the body of activation, its argument renamed
    return torch.tanh(values) * 0.5 + 0.5


def calls_activation(values):  # a wrapper: its graph is activation's by construction
    return activation(values)


REGISTRY = {"tanh01": activation}


def through_a_dict(x):  # review: a wrapper through an object, not a name the function reads
    return REGISTRY["tanh01"](x)


def through_globals(x):  # review: the same, by looking the name up at run time
    return globals()["activation"](x)


def only_when_compiled(x):  # a wrapper that eager calls never see
    if torch.compiler.is_compiling():
        return activation(x)
    return torch.sigmoid(2 * x)


def swallows_the_call(x):  # a wrapper that throws activation's result away, then computes it again
    try:
        REGISTRY["tanh01"](x)
    finally:
        squashed = torch.tanh(x)
    return squashed * 0.5 + 0.5


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
        (documented_only, "same body"),
        (extra_unused_argument, "same body"),
        (renamed_argument, "same body"),
        (calls_activation, "calls activation"),
        (through_a_dict, "calls activation"),
        (through_globals, "calls activation"),
        (torch.compile(through_a_dict), "calls activation"),
        (only_when_compiled, "calls activation"),
        (swallows_the_call, "calls activation"),
        (as_sigmoid, "FX graph cache had 0 hit"),
        (other_constant, "other values"),
        (functools.partial(activation), "not a function with its own body"),  # review: no __code__
        (ActivationCaller(), "not a function with its own body"),
        (lambda x, f=activation: f(x), "calls activation"),  # review: a wrapper through a default
    ],
)
def test_exercise_1_wrong_answers(candidate, message):
    code = activation.__code__
    with pytest.raises(AssertionError, match=message):
        check_refactor(candidate)
    assert activation.__code__ is code  # the check puts back what it swapped to watch the calls


def test_exercise_1_puts_activation_back_on_an_error():
    def fails_after_the_call(x):
        activation(x)
        raise ValueError("a broken answer")

    code = activation.__code__
    with pytest.raises(ValueError, match="a broken answer"):
        check_refactor(fails_after_the_call)
    assert activation.__code__ is code


def test_exercise_1_rejects_a_copy_of_activations_code():  # review: the copy kept the code unwatched
    code = activation.__code__
    copies = [
        types.FunctionType(code, activation.__globals__),
        types.FunctionType(code.replace(), activation.__globals__),  # an equal code object
    ]
    for copy in copies:
        with pytest.raises(AssertionError, match="copy of activation's code"):
            check_refactor(lambda x, copy=copy: copy(x))
    del copies, copy
    gc.collect()  # the frames of the failed checks hold the copies in a cycle
    assert check_refactor(refactored).startswith("Exercise 1: correct")


def with_docstring(x):
    """A docstring is co_consts[0]; without one, before Python 3.14, a None is: the indices move."""
    offset = None
    return torch.tanh(x) * 0.5 + 0.5 if offset is None else x


def without_docstring(x):
    offset = None
    return torch.tanh(x) * 0.5 + 0.5 if offset is None else x


def test_same_code_ignores_the_docstring():  # review: raw co_code holds indices into co_consts
    assert _same_code(with_docstring, without_docstring)
    assert _same_code(without_docstring, with_docstring)
    assert _same_code(activation, renamed_only) and _same_code(activation, documented_only)
    assert not _same_code(activation, refactored) and not _same_code(activation, other_constant)


def subtract(a, b):
    return b - a


def subtract_renamed(first, second):
    return second - first


def subtract_other_way(a, b):
    return a - b


def subtract_keyword_only(a, *, b):
    return b - a


def test_same_code_compares_variables_by_place():  # review: a signature change alone is no new body
    assert _same_code(activation, extra_unused_argument) and _same_code(activation, renamed_argument)
    assert _same_code(subtract, subtract_renamed)
    assert not _same_code(subtract, subtract_other_way) and not _same_code(subtract, subtract_keyword_only)


def reset_and_clear_python_modules():  # review: the C++ kernel library stays loaded
    torch.compiler.reset()
    PyCodeCache.cache_clear()


def forget_everything():
    torch.compiler.reset()
    clear_inductor_caches()


def forget_and_wipe_the_disk():  # "to be sure": deletes the entry the next compile could load
    forget_everything()
    shutil.rmtree(Path(cache_dir()) / "fxgraph", ignore_errors=True)


def forget_and_switch_the_disk_cache_off():  # review: the next compile reads no disk cache
    forget_everything()
    torch._inductor.config.fx_graph_cache = False


def forget_and_switch_the_autograd_cache_off():
    forget_everything()
    torch._functorch.config.enable_autograd_cache = False


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


@pytest.mark.parametrize(
    "forget", [forget_and_switch_the_disk_cache_off, forget_and_switch_the_autograd_cache_off]
)
def test_exercise_2_rejects_a_changed_cache_setting_and_puts_it_back(forget):
    import torch._functorch.config

    before = (torch._inductor.config.fx_graph_cache, torch._functorch.config.enable_autograd_cache)
    with pytest.raises(AssertionError, match="changed a disk-cache setting"):
        check_forget(forget)
    assert (torch._inductor.config.fx_graph_cache, torch._functorch.config.enable_autograd_cache) == before
