"""Notebook 07's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch._functorch.config

from helpers.exercises import nb07
from helpers.memory import SavedTensors, saved_activations


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


def _measure(fn, backend=nb07.CHAIN_BACKEND, *, rows=8, weight_excluded=True, grad=True):
    """What a learner's saved_activations call returns: fn compiled with backend (None: eager)."""
    x = torch.randn(rows, 16, requires_grad=grad)
    weight = torch.randn(16, 16, requires_grad=grad)
    torch._dynamo.reset()
    call = fn if backend is None else torch.compile(fn, backend=backend)
    return saved_activations(lambda: call(x, weight), exclude=[weight] if weight_excluded else [])


def _no_size_words(message):  # "higher" or "lower" would let a learner bisect to a small count
    words = set(message.lower().replace(",", " ").replace("(", " ").split())
    return not {"high", "higher", "low", "lower", "more", "fewer", "less"} & words


def test_exercise_2_saved_tensors():
    assert nb07.check_saved_tensors(_chain, None) == "Exercise 2: not answered yet."
    # x (for the weight's gradient) and the matmul's output; sin, cos and exp are recomputed.
    assert nb07.check_saved_tensors(_chain, _measure(_chain)) == "Exercise 2: correct."
    # The same maths written with torch.matmul and the functional forms: the same graph.
    also_right = lambda x, w: torch.exp(torch.cos(torch.sin(torch.matmul(x, w)))).sum()  # noqa: E731
    assert nb07.check_saved_tensors(also_right, _measure(also_right)) == "Exercise 2: correct."


@pytest.mark.parametrize("typed", [0, 1, 2, 3, 4], ids=lambda n: f"typed {n}")
def test_exercise_2_refuses_a_typed_number_even_the_right_count(typed):  # review: 0, 1, 2... found it
    with pytest.raises(AssertionError, match=rf"Exercise 2: {typed} is a number typed in, not a measurement"):
        nb07.check_saved_tensors(_chain, typed)


@pytest.mark.parametrize(
    ("measured", "told"),
    [
        pytest.param(
            lambda: _measure(_chain, None), "is what eager autograd saves", id="eager's measurement"
        ),
        pytest.param(
            lambda: _measure(_chain, weight_excluded=False),
            "counts the weight too",
            id="compiled, weight counted",
        ),
        pytest.param(
            lambda: _measure(_chain, None, weight_excluded=False),
            "counts the weight too",
            id="eager, weight counted",
        ),
        pytest.param(
            lambda: _measure(_chain, grad=False), "found nothing saved", id="inputs without gradients"
        ),
        pytest.param(lambda: _measure(_chain, rows=4), "is not what fn compiled", id="other inputs' shapes"),
        pytest.param(lambda: _measure(_chain, "aot_eager"), "is not what fn compiled", id="another backend"),
        pytest.param(
            lambda: _measure(_unchanged), "is not what fn compiled", id="the unchanged chain measured"
        ),
        pytest.param(
            lambda: SavedTensors(count=2, nbytes=2048),
            "is not what fn compiled",
            id="built by hand, bytes wrong",
        ),
    ],
)
def test_exercise_2_rejects_a_wrong_measurement(measured, told):
    saved = measured()
    with pytest.raises(AssertionError, match=rf"Exercise 2: your measurement \(.*\) {told}") as caught:
        nb07.check_saved_tensors(_chain, saved)
    message = str(caught.value)
    assert _no_size_words(message), message
    right = _measure(_chain)
    assert f"{right.count} tensors, {right.nbytes} bytes" not in message  # never the answer


def _detached_weight(x, weight):
    return torch.sin(x @ weight.detach()).cos().exp().sum()


def _without_grad(x, weight):
    with torch.no_grad():
        return torch.sin(x @ weight).cos().exp().sum()


@pytest.mark.parametrize("fn", [_detached_weight, _without_grad])
def test_exercise_2_rejects_a_chain_that_saves_less_by_cutting_gradients(fn):  # review
    with pytest.raises(AssertionError, match="and its gradients"):
        nb07.check_saved_tensors(fn, _measure(fn))


def test_exercise_2_rejects_the_unchanged_function_and_bad_arguments():
    with pytest.raises(AssertionError, match="matmul"):
        nb07.check_saved_tensors(_unchanged, _measure(_unchanged))
    after_the_chain = lambda x, w: (torch.sin(x).cos().exp() @ w).sum()  # noqa: E731
    with pytest.raises(AssertionError, match="matmul"):  # the matmul after the chain, not before
        nb07.check_saved_tensors(after_the_chain, _measure(after_the_chain))
    for not_a_measurement in ("2", 2.0, True, (2, 1024)):
        with pytest.raises(TypeError, match="saved must be the SavedTensors"):
            nb07.check_saved_tensors(_chain, not_a_measurement)
    with pytest.raises(TypeError, match="fn"):
        nb07.check_saved_tensors(2, _measure(_chain))


def _groups(body_lr, head_lr, **defaults):
    """AdamW over the check's two groups; a group's lr of None takes AdamW's default."""

    def factory(body, head):
        groups = [{"params": body}, {"params": head}]
        for group, lr in zip(groups, (body_lr, head_lr), strict=True):
            if lr is not None:
                group["lr"] = lr
        return torch.optim.AdamW(groups, **defaults)

    return factory


def _one_tensor_for_both(body, head):
    lr = torch.tensor(1e-3)
    return torch.optim.AdamW([{"params": body, "lr": lr}, {"params": head, "lr": lr}])


@pytest.mark.parametrize(
    "right",
    [
        pytest.param(_groups(torch.tensor(1e-3), torch.tensor(1e-3)), id="a tensor per group"),
        # The head's learning rate never changes: a float there is never guarded against a new value.
        pytest.param(
            _groups(torch.tensor(1e-3), 1e-3), id="the changing body's lr a tensor, the head's a float"
        ),
        pytest.param(
            _groups(None, torch.tensor(1e-3), lr=torch.tensor(1e-3)), id="the default for one group"
        ),
    ],
)
def test_exercise_3_scheduled_optimizer(right):
    assert nb07.check_scheduled_optimizer(None) == "Exercise 3: not answered yet."
    assert nb07.check_scheduled_optimizer(lambda body, head: None) == "Exercise 3: not answered yet."
    assert nb07.check_scheduled_optimizer(right) == "Exercise 3: correct."


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        # The notebook's recipe copied: one tensor, AdamW's default, shared by both groups. Nothing
        # recompiles, but the scheduler fills the one tensor with each group's value in turn.
        pytest.param(_groups(None, None, lr=torch.tensor(1e-3)), "one and the same", id="one default tensor"),
        pytest.param(_one_tensor_for_both, "one and the same", id="one tensor object in both groups"),
        # A float the scheduler changes recompiles (the guard lr == 0.001 fails).
        pytest.param(_groups(None, None, lr=1e-3), "wrong for 'recompilations'", id="float lr"),
        pytest.param(
            _groups(1e-3, torch.tensor(1e-3)), "wrong for 'recompilations'", id="tensor on the wrong group"
        ),
        # Finding 31: 0.0 stays 0.0 under LambdaLR, so the guard holds and nothing recompiles.
        pytest.param(_groups(None, None, lr=0.0), "wrong for 'body starts at START_LR'", id="float 0.0"),
        pytest.param(
            _groups(torch.tensor(5.0), torch.tensor(5.0)),
            "wrong for 'body starts at START_LR'",
            id="start 5.0",
        ),
        pytest.param(
            _groups(torch.tensor(0.0), torch.tensor(0.0)),
            "wrong for 'body starts at START_LR'",
            id="start 0.0",
        ),
        pytest.param(
            _groups(torch.tensor(1e-3), torch.tensor(1e-2)),
            "wrong for 'head starts at START_LR'",
            id="head 1e-2",
        ),
        pytest.param(
            lambda body, head: torch.optim.AdamW([*body, *head], lr=torch.tensor(1e-3)),
            "needs two",
            id="one group",
        ),
        pytest.param(
            lambda body, head: torch.optim.AdamW(
                [{"params": head, "lr": torch.tensor(1e-3)}, {"params": body, "lr": torch.tensor(1e-3)}]
            ),
            "needs two",
            id="groups swapped",
        ),
    ],
)
def test_exercise_3_rejects(wrong, match):
    with pytest.raises(AssertionError, match=match) as caught:
        nb07.check_scheduled_optimizer(wrong)
    assert "tensor" not in str(caught.value).lower()  # review: a key once read "lr is a tensor"


def _limit_names():
    return [name for name in nb07._RECOMPILE_LIMITS if hasattr(torch._dynamo.config, name)]


@pytest.mark.parametrize("lr", [1e-3, torch.tensor(1e-3)])
def test_exercise_3_rejects_a_changed_recompile_limit_and_puts_it_back(lr):  # review
    names = _limit_names()
    before = {name: getattr(torch._dynamo.config, name) for name in names}

    def no_recompiles(body, head):
        setattr(torch._dynamo.config, names[0], 0)  # recompile_limit, or cache_size_limit on older names
        return torch.optim.AdamW([{"params": body}, {"params": head}], lr=lr)

    with pytest.raises(AssertionError, match="changed a process-wide compiler setting"):
        nb07.check_scheduled_optimizer(no_recompiles)
    assert {name: getattr(torch._dynamo.config, name) for name in names} == before


def _float_lr_with(switch):
    def factory(body, head):
        switch()
        return torch.optim.AdamW([{"params": body}, {"params": head}], lr=1e-3)

    return factory


@pytest.mark.parametrize(
    "switch",
    [
        lambda: torch.compiler.set_stance("eager_on_recompile"),  # review: recompiles ran eagerly, uncounted
        lambda: torch.compiler.set_stance("force_eager"),  # nothing compiled
        lambda: setattr(torch._dynamo.config, "assume_static_by_default", False),  # dynamic floats
    ],
    ids=["eager_on_recompile", "force_eager", "assume_static_by_default"],
)
def test_exercise_3_rejects_a_process_wide_switch_and_puts_it_back(switch):  # review, round 4
    import torch._dynamo.eval_frame as eval_frame

    stance, static = eval_frame._stance, torch._dynamo.config.assume_static_by_default
    with pytest.raises(AssertionError, match="changed a process-wide compiler setting"):
        nb07.check_scheduled_optimizer(_float_lr_with(switch))
    assert eval_frame._stance == stance and torch._dynamo.config.assume_static_by_default == static


def test_exercise_3_rejects_another_optimizer_and_bad_arguments():
    for other in (torch.optim.SGD, torch.optim.Adam):
        with pytest.raises(AssertionError, match="AdamW"):
            nb07.check_scheduled_optimizer(
                lambda body, head, other=other: other(
                    [{"params": body, "lr": torch.tensor(1e-3)}, {"params": head, "lr": torch.tensor(1e-3)}]
                )
            )
    with pytest.raises(TypeError, match="factory"):
        nb07.check_scheduled_optimizer(torch.tensor(1e-3))
    with pytest.raises(ValueError, match="steps"):
        nb07.check_scheduled_optimizer(lambda body, head: None, steps=1)
    with pytest.raises(TypeError, match="compile_fn"):
        nb07.check_backward_compiled_early("dynamic=True")
