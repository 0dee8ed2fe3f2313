"""Notebook 13's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from helpers.exercises.nb13 import Blocks, Truncate, check_clean_state_dict, check_truncate


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# Exercise 1: a state dict from any kind of compiled model, loaded into an eager one.


def test_clean_state_dict_not_answered_and_right():
    assert check_clean_state_dict(None) == "Exercise 1: not answered yet."
    right = check_clean_state_dict(lambda sd: {k.replace("_orig_mod.", ""): v for k, v in sd.items()})
    assert right.startswith("Exercise 1: correct")


def _consume_leading_prefix(state_dict):
    consume_prefix_in_state_dict_if_present(state_dict, "_orig_mod.")
    return state_dict


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        # torch's helper strips the prefix at the start only: the regional checkpoint keeps its keys
        (_consume_leading_prefix, "regionally compiled.*does not load strictly"),
        # ... and it changes the dict in place and returns None
        (lambda sd: consume_prefix_in_state_dict_if_present(sd, "_orig_mod."), "returned NoneType"),
        # a fixed-width cut breaks the keys that had no prefix
        (lambda sd: {k[len("_orig_mod.") :]: v for k, v in sd.items()}, "does not load strictly"),
        # dropping what looks compiled loads nothing from a wrapper
        (lambda sd: {k: v for k, v in sd.items() if "_orig_mod" not in k}, "whole-model.*does not load"),
        # the right names on the wrong tensors (same shapes within a block)
        (
            lambda sd: {
                k.replace("_orig_mod.", "")
                .replace("blocks.0", "blocks.X")
                .replace("blocks.1", "blocks.0")
                .replace("blocks.X", "blocks.1"): v
                for k, v in sd.items()
            },
            "other values",
        ),
    ],
)
def test_clean_state_dict_wrong(answer, match):
    with pytest.raises(AssertionError, match=match):
        check_clean_state_dict(answer)


def test_clean_state_dict_rejects_an_answer_that_changes_the_tensors():
    def zeroed(sd):
        return {k.replace("_orig_mod.", ""): v.zero_() for k, v in sd.items()}

    with pytest.raises(AssertionError, match="other values"):
        check_clean_state_dict(zeroed)


def test_clean_state_dict_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="my_clean_state_dict"):
        check_clean_state_dict({"a": 1})


def test_blocks_keys_of_a_regional_compile_carry_the_prefix_inside():
    model = Blocks()
    model.blocks[0] = torch.compile(model.blocks[0], backend="aot_eager")
    assert "blocks.0._orig_mod.weight" in model.state_dict()


# Exercise 2: Truncate, exportable and compiled as one graph, still refusing bad lengths.


class _Checked(nn.Module):
    def forward(self, x, lengths):
        longest = lengths.max().item()
        torch._check(longest >= 1)
        torch._check(longest <= x.shape[1])
        return x[:, :longest]


class _NoValidation(nn.Module):
    def forward(self, x, lengths):
        return x[:, : lengths.max().item()]


class _UpperOnly(nn.Module):
    def forward(self, x, lengths):
        longest = lengths.max().item()
        torch._check(longest <= x.shape[1])
        return x[:, :longest]


class _FixedLength(nn.Module):
    def forward(self, x, lengths):
        return x[:, :6]


class _CheckedThenClamped(nn.Module):
    """Checks made harmless: a clamp first, so a length past the batch passes silently."""

    def forward(self, x, lengths):
        longest = lengths.max().clamp(max=x.shape[1]).item()
        torch._check(longest >= 1)
        torch._check(longest <= x.shape[1])
        return x[:, :longest]


class _EveryLengthChecked(nn.Module):
    """Refuses any empty sequence, which Truncate accepts: only its longest length is bounded."""

    def forward(self, x, lengths):
        torch._check(lengths.min().item() >= 1)
        longest = lengths.max().item()
        torch._check(longest <= x.shape[1])
        return x[:, :longest]


class _BoundTypedIn(nn.Module):
    """Bounds the length by 10, the width of the check's first batch, instead of by x."""

    def forward(self, x, lengths):
        longest = lengths.max().item()
        torch._check(longest >= 1)
        torch._check(longest <= 10)
        return x[:, :longest]


class _MessageReadsTheValue(nn.Module):
    def forward(self, x, lengths):
        longest = lengths.max().item()
        torch._check(longest >= 1, lambda: f"the longest length is {longest}")
        torch._check(longest <= x.shape[1])
        return x[:, :longest]


class _NonZeroOnly(nn.Module):
    """Refuses a longest length of 0 but not a negative one, which slices from the end."""

    def forward(self, x, lengths):
        longest = lengths.max().item()
        torch._check(longest != 0)
        torch._check(longest <= x.shape[1])
        return x[:, :longest]


class _ChainedCheck(nn.Module):
    """One torch._check on a chained comparison: Python's `and`, a question about the value."""

    def forward(self, x, lengths):
        longest = lengths.max().item()
        torch._check(1 <= longest <= x.shape[1])
        return x[:, :longest]


class _AndCheck(nn.Module):
    def forward(self, x, lengths):
        longest = lengths.max().item()
        torch._check(longest >= 1 and longest <= x.shape[1])
        return x[:, :longest]


def test_truncate_not_answered_and_right():
    assert check_truncate(None) == "Exercise 2: not answered yet."
    assert check_truncate(_Checked).startswith("Exercise 2: correct")
    assert check_truncate(_Checked()).startswith("Exercise 2: correct")  # an instance too


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (Truncate, "torch.export.export failed"),  # the Python `if` on the value
        (_NoValidation, "no longer raises"),
        (_UpperOnly, "longest length of 0 no longer raises"),
        (_FixedLength, r"returns a \(3, 6, 4\) tensor"),
        (_CheckedThenClamped, "past the batch no longer raises"),
        (_BoundTypedIn, "past a narrower batch no longer raises"),
        (_NonZeroOnly, "negative longest length|torch.export.export failed"),
        (_MessageReadsTheValue, "fullgraph=True raised|torch.export.export failed"),
        (_EveryLengthChecked, r"raises RuntimeError for lengths \[0, 3, 2\]"),
        (_ChainedCheck, "export failed.*holds a chained comparison.*`a <= b and b <= c`"),
        (_AndCheck, "export failed.*holds `and`"),
    ],
)
def test_truncate_wrong(answer, match):
    with pytest.raises(AssertionError, match=match):
        check_truncate(answer)


def test_truncate_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="MyTruncate"):
        check_truncate(lambda x, lengths: x)


def test_truncate_hint_names_python_questions_when_no_check_asks_one():
    # Truncate's `if` and `or` are outside any torch._check: the general hint lists both kinds.
    with pytest.raises(AssertionError, match=r"an `if`; an `and`, `or` or chained comparison"):
        check_truncate(Truncate)


def test_truncate_leaves_no_config_behind():
    check_truncate(_Checked)
    assert torch._dynamo.config.capture_scalar_outputs is False
