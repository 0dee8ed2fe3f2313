"""Notebook 07's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch._functorch.config

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


def _warmed_up_inside(fn, backend):  # review: both graphs compiled before the check's forward call
    compiled = torch.compile(fn, backend=backend)
    compiled(torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)).backward()
    return compiled


def _backward_inside_the_forward(fn, backend):
    compiled = torch.compile(fn, backend=backend)

    def forward(x, weight):
        loss = compiled(x, weight)
        loss.backward(retain_graph=True)
        return loss

    return forward


def _grad_inside_the_forward(fn, backend):  # review: autograd.grad sets no .grad, but runs the backward
    compiled = torch.compile(fn, backend=backend)

    def forward(x, weight):
        loss = compiled(x, weight)
        torch.autograd.grad(loss, weight, retain_graph=True)
        return loss

    return forward


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        (_warmed_up_inside, "compiled before compile_fn returned"),
        (_backward_inside_the_forward, "ran the backward itself"),
        (_grad_inside_the_forward, "ran the backward itself"),
    ],
)
def test_exercise_1_counts_only_the_checks_own_calls(wrong, match):
    with pytest.raises(AssertionError, match=match) as caught:
        nb07.check_backward_compiled_early(wrong)
    assert "dynamic" not in str(caught.value)


def _chain(x, weight):
    return torch.sin(x @ weight).cos().exp().sum()


def _unchanged(x, weight):
    return torch.sin(x).cos().exp().sum()


def _global_switch(fn, backend):
    torch._functorch.config.force_non_lazy_backward_lowering = True  # a global, not an answer
    return torch.compile(fn, backend=backend)


@pytest.mark.skipif(
    not hasattr(torch._functorch.config, "force_non_lazy_backward_lowering"),
    reason="no such switch before 2.13",
)
def test_exercise_1_rejects_the_global_switch_and_restores_it():
    with pytest.raises(AssertionError, match="force_non_lazy_backward_lowering"):
        nb07.check_backward_compiled_early(_global_switch)
    assert torch._functorch.config.force_non_lazy_backward_lowering is False


@pytest.mark.skipif(
    not hasattr(torch._functorch.config, "force_non_lazy_backward_lowering"),
    reason="no such switch before 2.13",
)
def test_exercise_1_rejects_the_switch_scoped_to_the_compiled_call():
    def scoped_switch(fn, backend):  # review: on only while the compiled function runs
        patch = torch._functorch.config.patch(force_non_lazy_backward_lowering=True)
        return patch(torch.compile(fn, backend=backend))

    with pytest.raises(AssertionError, match="force_non_lazy_backward_lowering"):
        nb07.check_backward_compiled_early(scoped_switch)
    assert torch._functorch.config.force_non_lazy_backward_lowering is False


def test_exercise_1_rejects_making_every_compile_dynamic_and_restores_it():
    def everything_dynamic(fn, backend):  # review: a process-wide setting, kept after the check
        torch._dynamo.config.assume_static_by_default = False
        return torch.compile(fn, backend=backend)

    def dynamic_at_the_first_call(fn, backend):  # the same, set by the function it returns
        compiled = torch.compile(fn, backend=backend)

        def call(*args):
            torch._dynamo.config.assume_static_by_default = False
            return compiled(*args)

        return call

    for wrong in (everything_dynamic, dynamic_at_the_first_call):
        with pytest.raises(AssertionError, match="assume_static_by_default changed, a global setting"):
            nb07.check_backward_compiled_early(wrong)
        assert torch._dynamo.config.assume_static_by_default is True


def test_exercise_2_saved_tensors():
    assert nb07.check_saved_tensors(_chain, None) == "Exercise 2: not answered yet."
    # x (for the weight's gradient) and the matmul's output; sin, cos and exp are recomputed.
    assert nb07.check_saved_tensors(_chain, 2) == "Exercise 2: correct."
    # The same maths written with torch.matmul and the functional forms: the same graph.
    also_right = lambda x, w: torch.exp(torch.cos(torch.sin(torch.matmul(x, w)))).sum()  # noqa: E731
    assert nb07.check_saved_tensors(also_right, 2) == "Exercise 2: correct."


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(1, id="the unchanged chain's count"),
        pytest.param(4, id="eager's count"),
        pytest.param(3, id="the weight counted too"),
        pytest.param(0, id="nothing saved"),
    ],
)
def test_exercise_2_rejects_wrong_counts(wrong):
    told = rf"Exercise 2: {wrong} is (not what the compiled|what eager)"
    with pytest.raises(AssertionError, match=told) as caught:
        nb07.check_saved_tensors(_chain, wrong)
    # Only that it is wrong: "higher" or "lower" would let a learner bisect to a small count.
    words = set(str(caught.value).lower().replace(",", " ").split())
    assert not {"high", "low", "more", "fewer", "less"} & words


def _detached_weight(x, weight):
    return torch.sin(x @ weight.detach()).cos().exp().sum()


def _without_grad(x, weight):
    with torch.no_grad():
        return torch.sin(x @ weight).cos().exp().sum()


@pytest.mark.parametrize(("fn", "count"), [(_detached_weight, 1), (_without_grad, 0)])
def test_exercise_2_rejects_a_chain_that_saves_less_by_cutting_gradients(fn, count):  # review
    with pytest.raises(AssertionError, match="and its gradients"):
        nb07.check_saved_tensors(fn, count)


def test_exercise_2_rejects_the_unchanged_function_and_bad_arguments():
    with pytest.raises(AssertionError, match="matmul"):
        nb07.check_saved_tensors(_unchanged, 1)
    with pytest.raises(AssertionError, match="matmul"):  # the matmul after the chain, not before
        nb07.check_saved_tensors(lambda x, w: (torch.sin(x).cos().exp() @ w).sum(), 2)
    with pytest.raises(TypeError, match="count"):
        nb07.check_saved_tensors(_chain, "2")
    with pytest.raises(TypeError, match="fn"):
        nb07.check_saved_tensors(2, 2)


def test_exercise_3_scheduled_optimizer():
    assert nb07.check_scheduled_optimizer(None) == "Exercise 3: not answered yet."
    right = nb07.check_scheduled_optimizer(lambda params: torch.optim.AdamW(params, lr=torch.tensor(1e-3)))
    assert right == "Exercise 3: correct."


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        # A float recompiles once the scheduler changes it (the guard lr == 0.001 fails).
        (lambda params: torch.optim.AdamW(params, lr=1e-3), "wrong for .*'lr value out of the guards'"),
        # Finding 31: 0.0 stays 0.0 under LambdaLR, so the guard holds and nothing recompiles.
        (lambda params: torch.optim.AdamW(params, lr=0.0), "wrong for 'starts at START_LR'"),
        # Finding 31: a tensor, but the wrong start value.
        (lambda params: torch.optim.AdamW(params, lr=torch.tensor(5.0)), "wrong for 'starts at START_LR'"),
        (lambda params: torch.optim.AdamW(params, lr=torch.tensor(0.0)), "wrong for 'starts at START_LR'"),
    ],
)
def test_exercise_3_rejects(wrong, match):
    with pytest.raises(AssertionError, match=match):
        nb07.check_scheduled_optimizer(wrong)


def _limit_names():
    return [name for name in nb07._RECOMPILE_LIMITS if hasattr(torch._dynamo.config, name)]


@pytest.mark.parametrize("lr", [1e-3, torch.tensor(1e-3)])
def test_exercise_3_rejects_a_changed_recompile_limit_and_puts_it_back(lr):  # review
    names = _limit_names()
    before = {name: getattr(torch._dynamo.config, name) for name in names}

    def no_recompiles(params):
        setattr(torch._dynamo.config, names[0], 0)  # recompile_limit, or cache_size_limit on older names
        return torch.optim.AdamW(params, lr=lr)

    with pytest.raises(AssertionError, match="changed Dynamo's recompile limit"):
        nb07.check_scheduled_optimizer(no_recompiles)
    assert {name: getattr(torch._dynamo.config, name) for name in names} == before


def test_exercise_3_message_does_not_name_the_answer():  # review: a key once read "lr is a tensor"
    with pytest.raises(AssertionError) as caught:
        nb07.check_scheduled_optimizer(lambda params: torch.optim.AdamW(params, lr=1e-3))
    assert "tensor" not in str(caught.value).lower()


def test_exercise_3_rejects_another_optimizer_and_bad_arguments():
    with pytest.raises(AssertionError, match="AdamW"):
        nb07.check_scheduled_optimizer(lambda params: torch.optim.SGD(params, lr=torch.tensor(1e-3)))
    with pytest.raises(TypeError, match="factory"):
        nb07.check_scheduled_optimizer(torch.tensor(1e-3))
    with pytest.raises(ValueError, match="steps"):
        nb07.check_scheduled_optimizer(lambda params: None, steps=1)
    with pytest.raises(TypeError, match="compile_fn"):
        nb07.check_backward_compiled_early("dynamic=True")
