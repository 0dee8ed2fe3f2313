"""Notebook 06's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from helpers.exercises.nb06 import (
    WIDTH,
    Mixer,
    _regional_frames,
    alternating_stack,
    check_fixed_block,
    check_mark_region,
    check_regional_frames,
)

# ---- Exercise 1: frames for Mixer, Norm, Mixer, ... compiled block by block --------------------


def test_exercise_1_right_and_unanswered():
    assert check_regional_frames(None) == "Exercise 1: not answered yet."
    assert check_regional_frames(2) == "Exercise 1: correct."


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (6, "counts the blocks"),
        (1, "is not the number of frames"),
        (4, "is not the number of frames"),
        (0, "nothing was compiled inside your CompileCounts"),
    ],
    ids=["one per block", "one for the stack", "a guess", "counted a second run without a reset"],
)
def test_exercise_1_rejects_wrong_counts_without_saying_higher_or_lower(wrong, says):
    with pytest.raises(AssertionError, match=rf"Exercise 1: {wrong} ") as caught:
        check_regional_frames(wrong)
    assert says in str(caught.value)
    assert "too high" not in str(caught.value) and "too low" not in str(caught.value)


def test_exercise_1_names_the_count_with_gradients_on():
    """Done without torch.no_grad(), a Mixer compiled for an input that does not require grad is
    compiled again for one that does: that count is wrong, and the check says why."""
    _, with_grad = _regional_frames(alternating_stack(), torch.randn(2, WIDTH), grad=True)
    _, without = _regional_frames(alternating_stack(), torch.randn(2, WIDTH))
    assert with_grad.frames != without.frames
    with pytest.raises(AssertionError, match="count with gradients on.*torch.no_grad"):
        check_regional_frames(with_grad.frames)


def test_exercise_1_names_a_bad_argument():
    with pytest.raises(TypeError, match="frames_read"):
        check_regional_frames("2")


# ---- Exercise 2: a per-block number that does not recompile every block ------------------------


class BufferBlock(nn.Module):
    def __init__(self, layer_idx: int, width: int = 16):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.register_buffer("damping", torch.tensor(1.0 / (layer_idx + 1)), persistent=False)

    def forward(self, x):
        return x + torch.relu(self.linear(x)) * self.damping


class FloatBlock(nn.Module):
    """Wrong: a Python float is a constant of the compiled code, like the int it replaces."""

    def __init__(self, layer_idx: int, width: int = 16):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.damping = 1.0 / (layer_idx + 1)

    def forward(self, x):
        return x + torch.relu(self.linear(x)) * self.damping


class OffByOneBlock(nn.Module):
    """Wrong: compiles once, but block i is damped by 1/i (and block 0 not at all)."""

    def __init__(self, layer_idx: int, width: int = 16):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.register_buffer("damping", torch.tensor(1.0 / max(layer_idx, 1)), persistent=False)

    def forward(self, x):
        return x + torch.relu(self.linear(x)) * self.damping


def test_exercise_2_right_and_unanswered():
    assert check_fixed_block(None) == "Exercise 2: not answered yet."
    assert check_fixed_block(BufferBlock) == "Exercise 2: correct."


def test_exercise_2_rejects_the_unchanged_block_and_a_python_float():
    from helpers.exercises.nb06 import DepthScaledBlock

    with pytest.raises(AssertionError, match=r"Exercise 2: .*compiled them 6 times, not once"):
        check_fixed_block(DepthScaledBlock)
    with pytest.raises(AssertionError, match=r"Exercise 2: .*compiled them [2-6] times, not once") as caught:
        check_fixed_block(FloatBlock)
    assert "you gave" not in str(caught.value) and "too high" not in str(caught.value)


def test_exercise_2_rejects_a_block_that_computes_something_else():
    with pytest.raises(AssertionError, match="must compute what DepthScaledBlock"):
        check_fixed_block(OffByOneBlock)


def test_exercise_2_names_a_bad_argument():
    with pytest.raises(TypeError, match="block_class"):
        check_fixed_block(BufferBlock(0))


# ---- Exercise 3: nested_compile_region on six Mixers -------------------------------------------


class RegionMixer(Mixer):
    forward = torch.compiler.nested_compile_region(Mixer.forward)


def mark_with_a_subclass(stack):
    for block in stack:
        block.__class__ = RegionMixer


def mark_with_method_type(stack):
    """Finding 27's shortcut: wrong with block 0's weights from torch 2.12, right by luck before."""
    marked = torch.compiler.nested_compile_region(Mixer.forward)
    for block in stack:
        block.forward = types.MethodType(marked, block)


def mark_only_the_first(stack):
    stack[0].__class__ = RegionMixer


def compile_each_block(stack):
    for block in stack:
        block.compile(backend="aot_eager")


class RegionLinear(nn.Linear):
    forward = torch.compiler.nested_compile_region(nn.Linear.forward)


def mark_only_the_linear(stack):
    """Wrong: six calls of one region that matches eager, but the ReLU and the residual add stay
    outside it, traced again for every block."""
    for block in stack:
        block.linear.__class__ = RegionLinear


def test_exercise_3_right_and_unanswered():
    assert check_mark_region(None) == "Exercise 3: not answered yet."
    assert check_mark_region(mark_with_a_subclass) == "Exercise 3: correct."


def test_exercise_3_rejects_the_method_type_shortcut_on_every_release():
    with pytest.raises(AssertionError, match="forward of their own"):
        check_mark_region(mark_with_method_type)


@pytest.mark.parametrize("wrong", [mark_only_the_first, compile_each_block])
def test_exercise_3_rejects_a_graph_without_six_calls_of_one_region(wrong):
    with pytest.raises(AssertionError, match="Exercise 3: the graph calls a region [0-5] times for 6 blocks"):
        check_mark_region(wrong)


def test_exercise_3_rejects_a_region_smaller_than_the_block():
    with pytest.raises(
        AssertionError, match=r"Exercise 3: the graph still runs .*relu.* outside the region"
    ) as caught:
        check_mark_region(mark_only_the_linear)
    assert "you gave" not in str(caught.value)


def mark_the_bound_linear_forward(stack):
    """Wrong: a bound method marked per block. torch 2.13 and 2.15 fail inside nested_compile_region
    (the method takes no attribute); 2.8 marks it, and the Linear carries a forward of its own."""
    for block in stack:
        block.linear.forward = torch.compiler.nested_compile_region(block.linear.forward)


def test_exercise_3_explains_a_marked_bound_method():
    with pytest.raises(
        AssertionError,
        match=r"Exercise 3: (nested_compile_region was given a bound method|.*carry a forward of their own)",
    ):
        check_mark_region(mark_the_bound_linear_forward)


def patch_the_class(stack):
    """Wrong: right for this stack, but Mixer itself is changed for the rest of the session."""
    type(stack[0]).forward = torch.compiler.nested_compile_region(Mixer.forward)


def test_exercise_3_rejects_and_undoes_a_patched_class():
    original = Mixer.__dict__["forward"]
    try:
        with pytest.raises(AssertionError, match=r"Exercise 3: .*class Mixer itself.*put it back"):
            check_mark_region(patch_the_class)
        assert Mixer.__dict__["forward"] is original
    finally:
        Mixer.forward = original
    assert check_mark_region(mark_with_a_subclass) == "Exercise 3: correct."


def test_exercise_3_names_a_bad_argument():
    with pytest.raises(TypeError, match="mark"):
        check_mark_region("mark_region")
