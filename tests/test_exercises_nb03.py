"""Notebook 03's self-checks accept the right answers and reject realistic wrong ones.

PYTEST_DONT_REWRITE: exercise 1's ``ex_a`` holds an ``assert`` that Dynamo must see as the learner
writes it; pytest's assertion rewriting would turn it into code that breaks the graph.
"""

from __future__ import annotations

import pytest
import torch

from helpers.exercises.nb03 import LeakyModel, check_break_hunt, check_fixed_model, check_signed_step


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# Exercise 1: count the breaks of the notebook's four functions, then fix the last one.


def ex_a(x):
    y = x * 2
    assert y.isfinite().all(), "non-finite values"
    return y


def ex_b(x):
    y = x * 2
    return y - y.mean().item()


def ex_c(x):
    y = x * 2
    if y.dim() == 2:
        return y.T
    return y


def ex_d(x):
    y = x * 2
    return torch.tensor(y.tolist()) + 1


def ex_d_fixed(x):
    y = x * 2
    return y + 1  # torch.tensor(y.tolist()) is y again, through Python numbers


FUNCTIONS = [ex_a, ex_b, ex_c, ex_d]
RIGHT = {"ex_a": 0, "ex_b": 1, "ex_c": 0, "ex_d": 1}


def test_break_hunt_not_answered_and_right():
    unanswered = dict.fromkeys(RIGHT)
    assert check_break_hunt(unanswered, FUNCTIONS, ex_d) == "Exercise 1: not answered yet."
    assert check_break_hunt(RIGHT, FUNCTIONS, ex_d_fixed).startswith("Exercise 1: correct")
    also_right = lambda x: (x * 2).clone() + 1  # noqa: E731 - a copy that stays in the graph
    assert check_break_hunt(RIGHT, FUNCTIONS, also_right).startswith("Exercise 1: correct")


@pytest.mark.parametrize(
    "wrong",
    [
        {"ex_a": 1},  # an assert on values breaks (it becomes a check in the graph)
        {"ex_c": 1},  # a branch on dim() breaks (it is known while tracing: a guard)
        {"ex_d": 0},  # .tolist() into torch.tensor stays in the graph
        {"ex_a": 1, "ex_c": 1},  # "every if or assert breaks"
        {"ex_a": 1, "ex_b": 2, "ex_c": 1, "ex_d": 2},  # graphs counted, not breaks
        {"ex_d": 2},  # "tolist breaks, and torch.tensor breaks again"
    ],
)
def test_break_hunt_wrong_counts(wrong):
    with pytest.raises(AssertionError, match="Exercise 1: wrong for"):
        check_break_hunt({**RIGHT, **wrong}, FUNCTIONS, ex_d_fixed)


@pytest.mark.parametrize(
    ("fixed", "match"),
    [
        (ex_d, "fullgraph=True raises"),  # unchanged: still a round trip through Python
        (lambda x: x * 2, "something else"),  # the + 1 dropped
        (lambda x: torch.tensor((x * 2).tolist()), "something else"),
        (torch.compiler.disable(ex_d), "fullgraph=True"),  # a way around the compiler, not a fix
        (torch.sin, "something else"),
        # A trip through .item(): fullgraph=True captures it from torch 2.10; the default compile breaks.
        (
            lambda x: torch.stack([torch.stack([torch.tensor(v.item()) for v in r]) for r in x * 2]) + 1,
            "fullgraph=True raises|default compile still breaks",
        ),
        (
            lambda x: x * 2 * ((x * 2).sum().item() / (x * 2).sum().item()) + 1,
            "fullgraph=True raises|default compile still breaks",
        ),
    ],
    ids=[
        "unchanged",
        "plus-one-dropped",
        "tolist-kept",
        "disabled",
        "other-maths",
        "item-kept",
        "item-ratio",
    ],
)
def test_break_hunt_wrong_fix(fixed, match):
    with pytest.raises(AssertionError, match=match):
        check_break_hunt(RIGHT, FUNCTIONS, fixed)


def test_break_hunt_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="counted"):
        check_break_hunt({**RIGHT, "ex_a": "no"}, FUNCTIONS, ex_d_fixed)
    with pytest.raises(TypeError, match="counted"):
        check_break_hunt({**RIGHT, "ex_a": True}, FUNCTIONS, ex_d_fixed)
    with pytest.raises(ValueError, match="counted"):
        check_break_hunt({**RIGHT, "ex_z": 1}, FUNCTIONS, ex_d_fixed)
    with pytest.raises(TypeError, match="functions"):
        check_break_hunt(RIGHT, [], ex_d_fixed)
    with pytest.raises(TypeError, match="fixed"):
        check_break_hunt(RIGHT, FUNCTIONS, None)


# Exercise 2: LeakyModel without its graph breaks.


class DoubleWhere(LeakyModel):
    """The solution: a second where gives the side not taken a harmless divisor."""

    def forward(self, x):
        h = self.proj(x)
        if not torch.compiler.is_compiling():
            print("debug: projected")
        peak = h.abs().max()
        safe_peak = torch.where(peak > 10, peak, torch.ones_like(peak))
        h = torch.where(peak > 10, h / safe_peak * 10, h)
        return self.out(torch.relu(h))


class ClampRewrite(LeakyModel):
    """Also right: branchless, h / max(peak, 10) * 10 is h when peak <= 10."""

    def forward(self, x):
        h = self.proj(x)
        peak = h.abs().max()
        h = h / peak.clamp(min=10) * 10
        return self.out(torch.relu(h))


class WithCond(LeakyModel):
    """Also right: torch.cond runs only the branch taken (in the forward and the backward)."""

    def forward(self, x):
        h = self.proj(x)
        peak = h.abs().max()
        h = torch.cond(peak > 10, lambda h, p: h / p * 10, lambda h, p: h.clone(), (h, peak))
        return self.out(torch.relu(h))


class BranchDeleted(LeakyModel):
    """Finding 11: deleting the branch must fail (the large batch takes it)."""

    def forward(self, x):
        return self.out(torch.relu(self.proj(x)))


class ElementwiseClamp(LeakyModel):
    """A clamp of each value to [-10, 10] is not a rescale by the peak."""

    def forward(self, x):
        return self.out(torch.relu(torch.clamp(self.proj(x), -10, 10)))


class NaiveWhere(LeakyModel):
    """Right results, but 0/0 on the side not taken: NaN gradients on the all-zero batch."""

    def forward(self, x):
        h = self.proj(x)
        peak = h.abs().max()
        h = torch.where(peak > 10, h / peak * 10, h)
        return self.out(torch.relu(h))


class PrintKept(DoubleWhere):
    """The branch fixed, the print left in: still a break."""

    def forward(self, x):
        print("debug: start")
        return super().forward(x)


class PrintFirst(LeakyModel):
    """The print moved before the first tensor operation: explain sees no break, the counter does."""

    def forward(self, x):
        print("debug: forward")
        h = self.proj(x)
        peak = h.abs().max()
        h = h / peak.clamp(min=10) * 10
        return self.out(torch.relu(h))


class IfKept(LeakyModel):
    """The print silenced while compiling, the data-dependent if kept."""

    def forward(self, x):
        h = self.proj(x)
        if not torch.compiler.is_compiling():
            print("debug: projected")
        peak = h.abs().max()
        if peak > 10:
            h = h / peak * 10
        return self.out(torch.relu(h))


class ItemIf(IfKept):
    """The branch on a Python number: still a branch on a value, and no gradient through the peak."""

    def forward(self, x):
        h = self.proj(x)
        peak = h.abs().max().item()
        if peak > 10:
            h = h / peak * 10
        return self.out(torch.relu(h))


class WholeBranchHidden(LeakyModel):
    """is_compiling() around the print *and* the branch: eager is right, compiled drops the rescale."""

    def forward(self, x):
        h = self.proj(x)
        if not torch.compiler.is_compiling():
            print("debug: projected")
            peak = h.abs().max()
            if peak > 10:
                h = h / peak * 10
        return self.out(torch.relu(h))


class DetachedPeak(LeakyModel):
    """The same outputs, but no gradient through the peak: wrong gradients on the large batch."""

    def forward(self, x):
        h = self.proj(x)
        peak = h.abs().max().detach()
        h = h / peak.clamp(min=10) * 10
        return self.out(torch.relu(h))


class Disabled(LeakyModel):
    """Nothing compiled, so nothing breaks."""

    @torch.compiler.disable
    def forward(self, x):
        return LeakyModel.forward(self, x)


def test_fixed_model_not_answered_and_right():
    assert check_fixed_model(None) == "Exercise 2: not answered yet."
    for right in (DoubleWhere, ClampRewrite, WithCond):
        assert check_fixed_model(right).startswith("Exercise 2: correct"), right.__name__


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        (LeakyModel, "2 graph break"),
        (BranchDeleted, "large batch"),
        (ElementwiseClamp, "large batch"),
        (NaiveWhere, "NaN"),
        (PrintKept, "graph break"),
        (PrintFirst, "1 graph break"),
        (IfKept, "graph break"),
        (ItemIf, "large batch .* gradients are not"),  # a Python float: no gradient through peak
        (Disabled, "no graph"),
        (WholeBranchHidden, "compiled, on a large batch"),
        (DetachedPeak, "large batch .* gradients are not"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_fixed_model_wrong(wrong, match):
    with pytest.raises(AssertionError, match=match):
        check_fixed_model(wrong)


def _threshold_model(threshold):
    class OtherThreshold(LeakyModel):
        def forward(self, x):
            h = self.proj(x)
            peak = h.abs().max()
            safe_peak = torch.where(peak > threshold, peak, torch.ones_like(peak))
            return self.out(torch.relu(torch.where(peak > threshold, h / safe_peak * 10, h)))

    return OtherThreshold


# review: peaks of 1.3 and 174 let 3 and 50 pass; peaks of 8 and 12 let 9 and 11 pass
@pytest.mark.parametrize("threshold", [3.0, 9.0, 9.9, 10.1, 11.0, 50.0])
def test_fixed_model_rejects_another_threshold(threshold):
    with pytest.raises(AssertionError, match="whose peak is"):
        check_fixed_model(_threshold_model(threshold))


@pytest.mark.parametrize("bad", [DoubleWhere(), "DoubleWhere", int])
def test_fixed_model_bad_input_names_the_argument(bad):
    with pytest.raises(TypeError, match="model_class"):
        check_fixed_model(bad)


# Exercise 3: signed_step with torch.cond.


def with_cond(x):
    return torch.cond(x.sum() > 0, lambda t: t.cos() + 1, lambda t: t.sin() - 1, (x,))


def unchanged(x):
    if x.sum() > 0:
        return x.cos() + 1
    return x.sin() - 1


def swapped(x):
    return torch.cond(x.sum() > 0, lambda t: t.sin() - 1, lambda t: t.cos() + 1, (x,))


def with_where(x):
    return torch.where(x.sum() > 0, x.cos() + 1, x.sin() - 1)


def first_element(x):
    return torch.cond(x[0] > 0, lambda t: t.cos() + 1, lambda t: t.sin() - 1, (x,))


def any_positive(x):
    return torch.cond((x > 0).any(), lambda t: t.cos() + 1, lambda t: t.sin() - 1, (x,))


def majority_vote(x):
    return torch.cond((x > 0).sum() > x.numel() // 2, lambda t: t.cos() + 1, lambda t: t.sin() - 1, (x,))


def median_sign(x):
    return torch.cond(x.median() > 0, lambda t: t.cos() + 1, lambda t: t.sin() - 1, (x,))


def at_least_zero(x):
    """A sum of 0 takes the first branch here, the second in signed_step."""
    return torch.cond(x.sum() >= 0, lambda t: t.cos() + 1, lambda t: t.sin() - 1, (x,))


def with_mean(x):
    """Also right: the mean has the sum's sign."""
    return torch.cond(x.mean() > 0, lambda t: t.cos() + 1, lambda t: t.sin() - 1, (x,))


def test_signed_step_not_answered_and_right():
    assert check_signed_step(None) == "Exercise 3: not answered yet."
    for right in (with_cond, with_mean):
        assert check_signed_step(right).startswith("Exercise 3: correct"), right.__name__


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        (unchanged, "fullgraph=True raises"),
        (swapped, "differs"),
        (with_where, "no torch.cond"),
        (first_element, "mixed signs"),
        (any_positive, "mixed signs"),
        (majority_vote, "more negatives|more positives"),
        (median_sign, "more negatives|more positives"),
        (at_least_zero, "whose sum is 0"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_signed_step_wrong(wrong, match):
    with pytest.raises(AssertionError, match=match):
        check_signed_step(wrong)


def test_signed_step_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="candidate"):
        check_signed_step("with_cond")
