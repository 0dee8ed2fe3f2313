"""Notebook 01's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import math

import pytest
import torch
from packaging.version import Version
from torch.torch_version import TorchVersion

from helpers.exercises.nb01 import (
    BREAK_EVEN_CASES,
    check_break_even,
    check_kernel_counts,
    check_version_guard,
    kernel_counts,
)
from helpers.guard import compile_support, parse_version

# --- Exercise 1: a version guard that decides whether something compiles ---------------------


def test_version_guard_right_answer_and_placeholder():
    assert check_version_guard(lambda v, m: parse_version(v) >= parse_version(m)) == "Exercise 1: correct."
    assert check_version_guard(lambda v, m: None) == "Exercise 1: not answered yet."


def _major_minor(version: str) -> tuple[int, int]:
    release = Version(version).release
    return release[0], (release[1] if len(release) > 1 else 0)


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(lambda v, m: v >= m, id="plain-strings"),
        pytest.param(lambda v, m: _major_minor(v) >= _major_minor(m), id="major-minor-only (finding 3)"),
        pytest.param(lambda v, m: parse_version(v) > parse_version(m), id="strict-greater"),
        pytest.param(lambda v, m: Version(v) >= Version(m), id="pep440-pre-release-before-release"),
        pytest.param(lambda v, m: TorchVersion(v) >= m, id="TorchVersion"),
        pytest.param(lambda v, m: Version(v).release >= Version(m).release, id="release-tuples"),
        pytest.param(lambda v, m: "yes", id="not-a-bool"),
        pytest.param(lambda v, m: True, id="always-compile"),
    ],
)
def test_version_guard_rejects_wrong_rules(wrong):
    with pytest.raises(AssertionError, match="Exercise 1: wrong for"):
        check_version_guard(wrong)


def test_version_guard_names_a_bad_argument():
    with pytest.raises(TypeError, match="candidate"):
        check_version_guard("2.5.1")  # type: ignore[arg-type]


# --- Exercise 2: count the kernels Inductor generated for a changed function -----------------


def _unchanged(x, weight):
    return torch.nn.functional.gelu(x @ weight) + x


def _with_layer_norm(x, weight):
    h = torch.nn.functional.gelu(x @ weight) + x
    return torch.nn.functional.layer_norm(h, h.shape[-1:])


def test_kernel_counts_of_a_program():
    code = "cpp_fused_add_0 = async_compile.cpp_pybinding(['float*'], r'''...''')\n"
    code += "    extern_kernels.mm(arg0_1, arg1_1, out=buf0)\n    cpp_fused_add_0(buf0)\n"
    assert kernel_counts(code) == (1, 1)
    with pytest.raises(TypeError, match="code"):
        kernel_counts(None)  # type: ignore[arg-type]


def test_kernel_counts_placeholder_and_bad_input_compile_nothing():
    assert check_kernel_counts(_unchanged, None) == "Exercise 2: not answered yet."
    with pytest.raises(TypeError, match="counts"):
        check_kernel_counts(_with_layer_norm, [1, 1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fn"):
        check_kernel_counts(None, (1, 1))  # type: ignore[arg-type]


def test_kernel_counts_rejects_the_unchanged_function():
    # Counting the kernels of the function as given, without adding the layer norm.
    with pytest.raises(AssertionError, match="layer_norm"):
        check_kernel_counts(_unchanged, (1, 1))


needs_inductor = pytest.mark.skipif(not compile_support("cpu").ok, reason="Inductor cannot build C++ here")


@needs_inductor
@pytest.mark.parametrize(
    ("counts", "right"),
    [
        ((1, 1), True),  # GELU, residual add and layer norm in one loop nest; the matmul in a library
        ((3, 1), False),  # one kernel per operation: counting ops, not kernels
        ((1, 0), False),  # the matmul fused into the C++ kernel
        ((4, 0), False),  # every operation its own kernel
        ((2, 1), False),  # the fused kernel counted twice: its definition and its call
    ],
)
def test_kernel_counts_right_and_wrong(counts, right):
    if right:
        assert check_kernel_counts(_with_layer_norm, counts) == "Exercise 2: correct."
    else:
        with pytest.raises(AssertionError, match="Exercise 2: expected"):
            check_kernel_counts(_with_layer_norm, counts)


# --- Exercise 3: the break-even point, on exactly representable numbers ----------------------


def _right(first: float, eager: float, compiled: float) -> int | None:
    if compiled >= eager:
        return None
    return max(1, math.ceil((first - compiled) / (eager - compiled)))


def test_break_even_right_answer_and_placeholder():
    assert check_break_even(_right) == "Exercise 3: correct."
    assert check_break_even(_right, (14.5, 0.27, 0.23)) == "Exercise 3: correct."
    assert check_break_even(lambda f, e, c: -1) == "Exercise 3: not answered yet."


def test_the_cases_are_exact_boundaries():
    # 2 + (7 - 1) * 0.25 == 7 * 0.5 exactly: the case separates <= from <.
    assert 2.0 + 6 * 0.25 == 7 * 0.5
    assert BREAK_EVEN_CASES[(2.0, 0.5, 0.25)] == 7


@pytest.mark.parametrize(
    "wrong",
    [
        # finding 4: off by one, and a strict "<" in the inequality
        pytest.param(lambda f, e, c: None if c >= e else math.ceil(f / (e - c)), id="off-by-one"),
        pytest.param(
            lambda f, e, c: None if c >= e else max(1, math.floor((f - c) / (e - c)) + 1), id="strict-less"
        ),
        pytest.param(
            lambda f, e, c: None if c >= e else max(1, math.floor((f - c) / (e - c))), id="round-down"
        ),
        pytest.param(lambda f, e, c: None if c >= e else math.ceil((f - c) / (e - c)), id="zero-calls"),
        pytest.param(
            lambda f, e, c: None if c > e else max(1, math.ceil((f - c) / (e - c))), id="divides-by-zero"
        ),
        pytest.param(lambda f, e, c: max(1, math.ceil((f - c) / (e - c))), id="never-none"),
        pytest.param(
            lambda f, e, c: None if c >= e else max(1, math.ceil(f / (e - c)) - 1),
            id="first-over-saving-minus-one",
        ),
    ],
)
def test_break_even_rejects_wrong_answers(wrong):
    with pytest.raises(AssertionError, match="Exercise 3: wrong for"):
        check_break_even(wrong)


def test_break_even_names_a_bad_argument():
    with pytest.raises(TypeError, match="candidate"):
        check_break_even(7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="measured"):
        check_break_even(_right, (1.0, -0.5, 0.25))
