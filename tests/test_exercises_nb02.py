"""Notebook 02's self-checks accept the right answers and reject realistic wrong ones.

Both checks build small C++ kernels with Inductor (freezing and GEMM autotuning need it), so these
tests skip where Inductor cannot compile for the CPU.
"""

from __future__ import annotations

import copy

import pytest
import torch

from helpers.exercises.nb02 import BATCH, check_autotuned, check_frozen, gemm_autotunings
from helpers.guard import compile_support

pytestmark = pytest.mark.skipif(not compile_support("cpu"), reason="needs Inductor's C++ kernels on the CPU")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# Exercise 1: freeze for real.


def frozen_right(model, x):
    with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
        compiled = torch.compile(model)
        compiled(x)
    return compiled


def options_only(model, x):
    """The trap, and exercise 1's suggested start: options= reach Inductor after Dynamo made the
    weights graph inputs."""
    with torch.inference_mode():
        compiled = torch.compile(model, options={"freezing": True})
        compiled(x)
    return compiled


def global_with_gradients(model, x):
    """The global is on, but gradients are on too: Dynamo does not freeze (is_parameter_freezing)."""
    with torch._inductor.config.patch(freezing=True):
        compiled = torch.compile(model)
        compiled(x)
    return compiled


def global_set_after_the_first_call(model, x):
    """The global is switched on only once the first call has traced."""
    compiled = torch.compile(model)
    with torch.inference_mode():
        compiled(x)
    with torch._inductor.config.patch(freezing=True), torch.inference_mode():
        compiled(x)
    return compiled


def eager_backend(model, x):
    """Frozen for Dynamo, but the eager backend runs the module's live parameters."""
    with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
        compiled = torch.compile(model, backend="eager")
        compiled(x)
    return compiled


def frozen_under_no_grad(model, x):
    """Frozen, but traced under no_grad: the check's inference-mode call recompiles without freezing."""
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        compiled = torch.compile(model)
        compiled(x)
    return compiled


def aot_eager_backend(model, x):
    """Frozen for Dynamo, but aot_eager reads the module's live parameters."""
    with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
        compiled = torch.compile(model, backend="aot_eager")
        compiled(x)
    return compiled


def stored_output(model, x):
    """Compiles (unfrozen), then replays its first output: looks frozen, computes nothing."""
    with torch.inference_mode():
        compiled = torch.compile(model, options={"freezing": True})
        out = compiled(x)
    return lambda _x: out


def returns_the_eager_model(model, x):
    with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
        torch.compile(model)(x)
    return model


def compiles_a_copy(model, x):
    """Unfrozen, on a copy of the weights: the check's change to the model never reaches it."""
    with torch.inference_mode():
        compiled = torch.compile(copy.deepcopy(model))
        compiled(x)
    return compiled


def copy_with_options(model, x):
    """Review: options= on a copy. The freezing pass runs (options= turn it on in Inductor), but the
    copy's weights are graph inputs, and the check's change to the model never reaches the copy."""
    with torch.inference_mode():
        compiled = torch.compile(copy.deepcopy(model), options={"freezing": True})
        compiled(x)
    return compiled


def copy_frozen_with_the_global(model, x):
    """The recipe, on a copy: frozen for real, but the copy's weights, not the given model's."""
    with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
        compiled = torch.compile(copy.deepcopy(model))
        compiled(x)
    return compiled


def frozen_global_around_first_call_only(model, x):
    """Right: torch.compile only wraps; the global matters while the first call traces."""
    compiled = torch.compile(model)
    with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
        compiled(x)
    return compiled


def not_compiled(model, x):
    """A cached result is 'stale' too, but nothing was compiled."""
    cached = model(x).detach()
    return lambda _x: cached


def test_frozen_not_answered_and_right():
    assert check_frozen(None) == "Exercise 1: not answered yet."
    assert check_frozen(lambda model, x: None) == "Exercise 1: not answered yet."
    assert check_frozen(frozen_right).startswith("Exercise 1: correct")
    assert check_frozen(frozen_global_around_first_call_only).startswith("Exercise 1: correct")


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        (options_only, "saw a weight change"),
        (global_with_gradients, "under torch.inference_mode"),  # traced with gradients: recompiles
        (global_set_after_the_first_call, "saw a weight change"),
        (eager_backend, "saw a weight change"),
        (not_compiled, "compiled nothing"),
        (frozen_under_no_grad, "under torch.inference_mode"),
        (aot_eager_backend, "saw a weight change"),
        (stored_output, "on a new input"),
        (returns_the_eager_model, "saw a weight change"),
        (compiles_a_copy, "froze none of the given model's weights"),
        (copy_with_options, "froze none of the given model's weights"),
        (copy_frozen_with_the_global, "froze none of the given model's weights"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_frozen_wrong(wrong, match):
    with pytest.raises(AssertionError, match=match):
        check_frozen(wrong)


def test_frozen_messages_name_the_folded_weight():
    """Review: only folded or prepacked frozen weights are copies, so the messages name gain, the one
    the check changes, rather than promise that a frozen model never sees any weight change."""
    assert "exp(gain) folded into a constant" in check_frozen(frozen_right)
    with pytest.raises(AssertionError, match=r"saw a weight change \(of gain, whose exp\(gain\)"):
        check_frozen(options_only)


def test_frozen_hint_points_without_giving_the_fix():
    """Review: the suggested start fails because nothing froze, and its hint points to section 3
    instead of naming the setting that fixes it."""
    with pytest.raises(AssertionError, match="saw a weight change") as caught:
        check_frozen(options_only)
    message = str(caught.value)
    assert "section 3" in message
    assert "config.freezing" not in message and "inference_mode" not in message


def test_frozen_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="compile_frozen"):
        check_frozen("torch.compile")


# Exercise 2: max-autotune tunes a batched matmul on a CPU without freezing (finding 5).


def test_autotuned_not_answered_and_right():
    assert check_autotuned(None) == "Exercise 2: not answered yet."
    right = check_autotuned(lambda x, w: torch.bmm(x, w.expand(x.shape[0], -1, -1)))
    assert right.startswith("Exercise 2: correct")
    einsum = check_autotuned(lambda x, w: torch.einsum("bij,jk->bik", x, w))
    assert einsum.startswith("Exercise 2: correct")


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        (lambda x, w: x @ w, "tuned no matrix multiply"),  # folded into one 2-D mm with a non-constant weight
        (lambda x, w: torch.matmul(x, w), "tuned no matrix multiply"),
        (lambda x, w: (x.reshape(-1, 64) @ w).reshape(BATCH, 64, 64), "tuned no matrix multiply"),
        (lambda x, w: torch.bmm(x, x), "does not compute"),  # tuned, but another product
        (lambda x, w: x.sum(), "must return a tensor of shape"),
        (lambda x, w: torch.stack([xi @ w for xi in x]), "tuned no matrix multiply"),  # 8 plain mm
        (lambda x, w: torch.nn.functional.linear(x, w.T), "tuned no matrix multiply"),
        (lambda x, w: torch.bmm(x, w.T.expand(BATCH, -1, -1)), "does not compute"),
        (lambda x, w: x @ w + 0 * torch.bmm(x, x), "still multiplies with aten.mm"),  # a bmm tuned beside
        (lambda x, w: (x.unsqueeze(-1) * w).sum(-2) + 0 * torch.bmm(x, x), "not that batched matmul"),
        (  # review: a bmm of w that the result only multiplies by zero
            lambda x, w: (x.unsqueeze(-1) * w).sum(-2) + 0 * torch.bmm(x, w.expand(BATCH, -1, -1)),
            "not that batched matmul",
        ),
    ],
    ids=[
        "matmul-operator",
        "torch.matmul",
        "reshape-mm",
        "bmm-wrong-operand",
        "wrong-shape",
        "loop-of-mm",
        "F.linear",
        "bmm-transposed-weight",
        "extra-bmm-beside-mm",
        "no-gemm-projection-and-an-extra-bmm",
        "no-gemm-projection-and-a-dead-bmm-of-w",
    ],
)
def test_autotuned_wrong(wrong, match):
    with pytest.raises(AssertionError, match=match):
        check_autotuned(wrong)


def test_autotuned_hint_says_how_to_open_the_rule():
    with pytest.raises(AssertionError, match="tuned no matrix multiply") as caught:
        check_autotuned(lambda x, w: x @ w)
    assert "inspect.getsource(torch._inductor.utils.use_cpp_bmm_template)" in str(caught.value)


def test_autotuned_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="project"):
        check_autotuned("torch.bmm")


def test_gemm_autotunings_counts_bmm_without_freezing():
    x, w = torch.randn(2, 16, 16), torch.randn(2, 16, 16)
    runs, result = gemm_autotunings(torch.bmm, x, w)
    assert runs >= 1
    torch.testing.assert_close(result, torch.bmm(x, w), rtol=1e-3, atol=1e-3)
