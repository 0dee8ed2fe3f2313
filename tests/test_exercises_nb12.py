"""Notebook 12's self-checks accept the right answers and reject realistic wrong ones.

Each wrong answer is an operator a learner could write; custom_op replaces an operator of the same
name, so every test defines its own under one name per exercise.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.exercises.nb12 import check_lookup_into_op, check_pairwise_op, lookup_into, pairwise_mean


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# Exercise 1: pairwise_mean as a custom operator with a fake kernel.


def _pairwise_op(fake=None):
    @torch.library.custom_op("course_test::pairwise_mean", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return pairwise_mean(x)

    if fake is not None:
        op.register_fake(fake)
    return op


def _right_fake(x):
    return x.new_empty(*x.shape[:-1], x.shape[-1] // 2)


def test_pairwise_not_answered_and_right():
    assert check_pairwise_op(None) == "Exercise 1: not answered yet."
    assert check_pairwise_op(_pairwise_op(_right_fake)).startswith("Exercise 1: correct")
    assert check_pairwise_op(_pairwise_op(_also_right)).startswith("Exercise 1: correct")


def _also_right(x):
    return torch.empty(x.shape[:-1] + (x.shape[-1] // 2,), dtype=x.dtype, device=x.device)


def _drops_device(x):
    return torch.empty(x.shape[:-1] + (x.shape[-1] // 2,), dtype=x.dtype)  # on the default device


def _returns_input_shape(x):
    return torch.empty_like(x)  # the fake of section 2, copied: the output is half as long


def _fixed_float32(x):
    return x.new_empty(*x.shape[:-1], x.shape[-1] // 2, dtype=torch.float32)


def _two_dimensions_only(x):
    return x.new_empty(x.shape[0], x.shape[1] // 2)  # right for (4, 16) only


def _calls_numpy(x):
    return pairwise_mean(x)  # a fake kernel that runs the real code: fake tensors hold no data


def _first_dimension_halved(x):
    return x.new_empty(x.shape[0] // 2, *x.shape[1:])


def _sliced_view(x):
    return torch.empty_like(x)[..., : x.shape[-1] // 2]  # right shape, strides of the input: a view


def _empty_like_a_slice(x):
    return torch.empty_like(x[..., : x.shape[-1] // 2])  # the input's layout where the slice is dense


def _transposed_layout(x):
    return x.new_empty(x.shape[-1] // 2, *x.shape[:-1]).movedim(0, -1)  # right shape, other strides


@pytest.mark.parametrize(
    ("fake", "match"),
    [
        (None, "has no fake kernel"),
        (_returns_input_shape, "wrong shape"),
        (_fixed_float32, "wrong dtype"),
        (_two_dimensions_only, "fake kernel raised|wrong shape"),
        (_calls_numpy, "fake kernel raised"),
        (_first_dimension_halved, "wrong shape"),
        (_drops_device, "wrong device"),
        (_sliced_view, "strides differ"),  # torch 2.8's opcheck passes it on a CPU; Inductor fails it
        (_transposed_layout, "strides differ"),
        (_empty_like_a_slice, "strides differ"),  # passes on contiguous inputs; a transposed one fails
    ],
    ids=[
        "no-fake",
        "empty-like",
        "always-float32",
        "2d-only",
        "calls-numpy",
        "halves-dim-0",
        "drops-device",
        "sliced-view",
        "transposed-layout",
        "empty-like-of-a-slice",
    ],
)
def test_pairwise_wrong_fake(fake, match):
    with pytest.raises(AssertionError, match=match) as raised:
        check_pairwise_op(_pairwise_op(fake))
    assert "(2, 3, 4)" not in str(raised.value) and "torch.Size" not in str(raised.value)


def test_pairwise_not_a_custom_op():
    with pytest.raises(AssertionError, match="not a custom operator"):
        check_pairwise_op(torch.compiler.disable(pairwise_mean))
    with pytest.raises(AssertionError, match="not a custom operator"):
        check_pairwise_op(pairwise_mean)


@pytest.mark.parametrize("mutates_args", [("x",), "unknown"], ids=["declares-x", "unknown"])
def test_pairwise_declares_a_write(mutates_args):
    @torch.library.custom_op("course_test::pairwise_mean", mutates_args=mutates_args)
    def op(x: torch.Tensor) -> torch.Tensor:
        return pairwise_mean(x)

    op.register_fake(_right_fake)
    with pytest.raises(AssertionError, match="writes its input") as raised:
        check_pairwise_op(op)
    assert "mutates_args=()" not in str(raised.value)


def test_pairwise_body_returns_another_dtype():
    @torch.library.custom_op("course_test::pairwise_mean", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return pairwise_mean(x.double())

    op.register_fake(lambda x: x.new_empty(*x.shape[:-1], x.shape[-1] // 2, dtype=torch.float64))
    with pytest.raises(AssertionError, match="another dtype"):
        check_pairwise_op(op)


def test_pairwise_body_computes_something_else():
    @torch.library.custom_op("course_test::pairwise_mean", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return x[..., ::2].clone()  # one of each pair, not their mean

    op.register_fake(_right_fake)
    with pytest.raises(AssertionError, match="something else"):
        check_pairwise_op(op)


# Exercise 2: lookup_into (writes into out) declared truthfully.


def _lookup_into_op(mutates_args, fake=True):
    @torch.library.custom_op("course_test::lookup_into", mutates_args=mutates_args)
    def op(out: torch.Tensor, x: torch.Tensor) -> None:
        lookup_into(out, x)

    if fake:
        op.register_fake(lambda out, x: None)
    return op


def test_lookup_into_not_answered_and_right():
    assert check_lookup_into_op(None) == "Exercise 2: not answered yet."
    assert check_lookup_into_op(_lookup_into_op(("out",))).startswith("Exercise 2: correct")
    # An operator that writes an input and returns nothing gets a generated fake kernel (torch 2.8 to 2.15).
    assert check_lookup_into_op(_lookup_into_op(("out",), fake=False)).startswith("Exercise 2: correct")


@pytest.mark.parametrize(
    ("mutates_args", "fake", "match"),
    [
        ((), True, "does not list"),  # the lie: declares nothing written
        ((), False, "does not list"),  # ... and, writing nothing, gets no generated fake kernel
        (("x",), True, "only reads"),  # the wrong argument
        ("unknown", True, "only reads"),  # pessimistic: every argument written
        (("out", "x"), True, "only reads"),
    ],
    ids=["declares-nothing", "declares-nothing-no-fake", "declares-x", "unknown", "declares-both"],
)
def test_lookup_into_wrong_declaration(mutates_args, fake, match):
    with pytest.raises(AssertionError, match=match) as raised:
        check_lookup_into_op(_lookup_into_op(mutates_args, fake))
    assert "mutates_args=('out'" not in str(raised.value)


def test_lookup_into_returns_its_input():
    @torch.library.custom_op("course_test::lookup_into", mutates_args=("out",))
    def op(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        lookup_into(out, x)
        return out  # an alias of an input: custom_op forbids it

    op.register_fake(lambda out, x: out)
    with pytest.raises(AssertionError, match="may not return one of its inputs|raised"):
        check_lookup_into_op(op)


def test_lookup_into_returns_a_copy():
    @torch.library.custom_op("course_test::lookup_into", mutates_args=("out",))
    def op(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        lookup_into(out, x)
        return out.clone()

    op.register_fake(lambda out, x: torch.empty_like(out))
    with pytest.raises(AssertionError, match="does not do what lookup_into does"):
        check_lookup_into_op(op)


def test_lookup_into_other_arguments():
    @torch.library.custom_op("course_test::lookup_into", mutates_args=("buffer",))
    def op(buffer: torch.Tensor, values: torch.Tensor) -> None:
        lookup_into(buffer, values)

    op.register_fake(lambda buffer, values: None)
    with pytest.raises(AssertionError, match=r"keep lookup_into's arguments"):
        check_lookup_into_op(op)


def test_library_functions():
    assert pairwise_mean(torch.arange(8.0).reshape(2, 4)).tolist() == [[0.5, 2.5], [4.5, 6.5]]
    out = torch.empty(2)
    lookup_into(out, torch.tensor([0.0, 3.0]))
    assert np.allclose(out.numpy(), [0.0, np.tanh(3.0)], atol=1e-6)


def test_pairwise_cpu_only_kernel():
    # device_types="cpu", as in custom_op's docstring examples: right on a CPU, nothing to run on a GPU
    @torch.library.custom_op("course_test::pairwise_cpu_only", mutates_args=(), device_types="cpu")
    def cpu_only(x: torch.Tensor) -> torch.Tensor:
        return pairwise_mean(x)

    cpu_only.register_fake(_right_fake)
    with pytest.raises(AssertionError, match="CPU tensors only"):
        check_pairwise_op(cpu_only)
