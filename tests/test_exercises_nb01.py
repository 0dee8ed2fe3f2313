"""Notebook 01's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import pytest
import torch
from packaging.version import Version
from torch.torch_version import TorchVersion

from helpers.exercises.nb01 import (
    aten_ops,
    check_aten_ops,
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
        pytest.param(
            lambda v, m: Version(v.split("+")[0].split("a")[0]) >= Version(m), id="strips-a0-only (review)"
        ),
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
        with pytest.raises(AssertionError, match="Exercise 2: .* is not it"):
            check_kernel_counts(_with_layer_norm, counts)


# --- Exercise 3: read the ATen graph AOTAutograd gives a backend -----------------------------


def _softmax_tail(x, weight):
    h = torch.nn.functional.gelu(x @ weight) + x
    return torch.softmax(h, dim=-1)


def test_aten_ops_right_answer_and_placeholder():
    assert check_aten_ops(_unchanged, None) == "Exercise 3: not answered yet."
    right = aten_ops(_softmax_tail, torch.randn(2, 4, 8), torch.randn(8, 8))
    # On the releases in range (2.8, 2.13, 2.15): a matmul on a 3-D input is view, mm, _unsafe_view.
    assert right[-1] == "aten._softmax.default" and "aten.mm.default" in right
    assert check_aten_ops(_softmax_tail, right) == "Exercise 3: correct."
    assert check_aten_ops(_softmax_tail, tuple(right)) == "Exercise 3: correct."


@pytest.mark.parametrize(
    "wrong",
    [
        # Dynamo's graph, the names in the code, not ATen's
        pytest.param(["matmul", "gelu", "add", "softmax"], id="dynamo-names"),
        # section 1's 2-D answer plus the softmax: the 3-D matmul's views left out
        pytest.param(
            ["aten.mm.default", "aten.gelu.default", "aten.add.Tensor", "aten._softmax.default"],
            id="two-d-graph",
        ),
        # the public name of the softmax, not the ATen operator AOTAutograd records
        pytest.param(
            [
                "aten.view.default",
                "aten.mm.default",
                "aten._unsafe_view.default",
                "aten.gelu.default",
                "aten.add.Tensor",
                "aten.softmax.int",
            ],
            id="softmax-int",
        ),
        # what Inductor's decompositions would make of GELU, read off the wrong graph
        pytest.param(
            [
                "aten.view.default",
                "aten.mm.default",
                "aten._unsafe_view.default",
                "aten.mul.Tensor",
                "aten.erf.default",
                "aten.add.Tensor",
                "aten._softmax.default",
            ],
            id="inductor-decompositions",
        ),
    ],
)
def test_aten_ops_rejects_wrong_readings(wrong):
    with pytest.raises(AssertionError, match="Exercise 3: .* is not it"):
        check_aten_ops(_softmax_tail, wrong)


def test_aten_ops_rejects_the_unchanged_function_and_bad_arguments():
    # The ops of the function as given, without the softmax.
    with pytest.raises(AssertionError, match="softmax"):
        check_aten_ops(_unchanged, ["aten.mm.default", "aten.gelu.default", "aten.add.Tensor"])
    with pytest.raises(TypeError, match="ops"):
        check_aten_ops(_softmax_tail, "aten.mm.default")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fn"):
        check_aten_ops(None, [])  # type: ignore[arg-type]
