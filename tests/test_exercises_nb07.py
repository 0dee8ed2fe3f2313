"""Notebook 07's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import pytest
import torch

from helpers.exercises import nb07


def test_exercise_1_backward_compiled_during_the_forward():
    assert nb07.check_backward_compiled_early(None) == "Exercise 1: not answered yet."
    assert nb07.check_backward_compiled_early(lambda fn, backend: None) == "Exercise 1: not answered yet."
    right = nb07.check_backward_compiled_early(
        lambda fn, backend: torch.compile(fn, backend=backend, dynamic=True)
    )
    assert right == "Exercise 1: correct."


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(
            lambda fn, backend: torch.compile(fn, backend=backend),
            id="default compile: backward at backward()",
        ),
        pytest.param(
            lambda fn, backend: torch.compile(fn, backend=backend, dynamic=False), id="dynamic=False"
        ),
        pytest.param(
            lambda fn, backend: torch.compile(fn, backend="aot_eager", dynamic=True),
            id="not the given backend",
        ),
        pytest.param(lambda fn, backend: fn, id="not compiled"),
    ],
)
def test_exercise_1_rejects(wrong):
    with pytest.raises(AssertionError, match="Exercise 1: wrong for"):
        nb07.check_backward_compiled_early(wrong)


def test_exercise_2_saved_tensors():
    assert nb07.check_saved_tensors(None) == "Exercise 2: not answered yet."
    assert nb07.check_saved_tensors(1) == "Exercise 2: correct."
    for wrong in (3, 0, 2):  # eager's count, "nothing", one per op but the last
        with pytest.raises(AssertionError, match="Exercise 2: expected 1"):
            nb07.check_saved_tensors(wrong)
    with pytest.raises(TypeError, match="prediction"):
        nb07.check_saved_tensors("1")


def test_exercise_3_scheduled_optimizer():
    assert nb07.check_scheduled_optimizer(None) == "Exercise 3: not answered yet."
    right = nb07.check_scheduled_optimizer(lambda params: torch.optim.AdamW(params, lr=torch.tensor(1e-3)))
    assert right == "Exercise 3: correct."


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        # A float recompiles once the scheduler changes it (the guard lr == 0.001 fails).
        (lambda params: torch.optim.AdamW(params, lr=1e-3), "'lr is a tensor': False"),
        # Finding 31: 0.0 stays 0.0 under LambdaLR, so the guard holds and nothing recompiles.
        (lambda params: torch.optim.AdamW(params, lr=0.0), "'starts at START_LR': False"),
        # Finding 31: a tensor, but the wrong start value.
        (lambda params: torch.optim.AdamW(params, lr=torch.tensor(5.0)), "'starts at START_LR': False"),
        (lambda params: torch.optim.AdamW(params, lr=torch.tensor(0.0)), "'starts at START_LR': False"),
    ],
)
def test_exercise_3_rejects(wrong, match):
    with pytest.raises(AssertionError, match=match):
        nb07.check_scheduled_optimizer(wrong)


def test_exercise_3_rejects_another_optimizer_and_bad_arguments():
    with pytest.raises(AssertionError, match="AdamW"):
        nb07.check_scheduled_optimizer(lambda params: torch.optim.SGD(params, lr=torch.tensor(1e-3)))
    with pytest.raises(TypeError, match="factory"):
        nb07.check_scheduled_optimizer(torch.tensor(1e-3))
    with pytest.raises(ValueError, match="steps"):
        nb07.check_scheduled_optimizer(lambda params: None, steps=1)
    with pytest.raises(TypeError, match="compile_fn"):
        nb07.check_backward_compiled_early("dynamic=True")
