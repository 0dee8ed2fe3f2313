"""Self-checks for notebook 02's exercises: each compiles the learner's code and reads a compiler fact.

Exercise 1 freezes a small model and checks that freezing folded its weight ``gain`` into a
constant (a later in-place change of ``gain`` is not seen, and nothing recompiles) and that the
weights frozen are the given model's, not a copy's. Exercise 2 counts the GEMM
autotuning runs of ``mode="max-autotune-no-cudagraphs"`` on a CPU. Both build C++ kernels with
Inductor on the CPU; their models are tiny, so each check compiles in seconds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
from torch import nn

from helpers.counters import CompileCounts
from helpers.exercises import check_answer

__all__ = [
    "BATCH",
    "GainedMLP",
    "autotune_quiet_options",
    "check_autotuned",
    "check_frozen",
    "gemm_autotunings",
]


class GainedMLP(nn.Module):
    """``Linear -> GELU -> Linear``, scaled by ``exp(gain)``: a parameter freezing folds away.

    With frozen weights Inductor computes ``exp(gain)`` once, at compile time (constant folding),
    so a later in-place change of ``gain`` is not seen by the compiled model, on any device.

    Example:
        >>> GainedMLP(width=8)(torch.ones(2, 8)).shape
        torch.Size([2, 8])
    """

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width))
        self.gain = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * self.gain.exp()


def check_frozen(compile_frozen: Callable[[nn.Module, torch.Tensor], Any] | None) -> str:
    """Exercise 1: ``compile_frozen(model, x)`` must return ``model`` compiled with frozen weights.

    A function that returns ``None`` and compiles nothing is not answered yet. The check builds
    a :class:`GainedMLP` in eval mode, calls ``compile_frozen(model, x)`` (which compiles and
    makes the first call), then changes ``model.gain`` in place and calls the returned model on a
    new input under ``torch.inference_mode()``. Freezing folds ``exp(gain)`` into a constant of the
    compiled code: the result must be that of ``gain`` at compile time, with no recompilation.
    Unfrozen, ``gain`` is a graph input: the result follows the change. The weight is restored
    afterwards. (Not every frozen weight is a copy: one that is neither folded nor prepacked can
    share its storage with the parameter, so an in-place change of it can still be seen.)

    A copy of the model never sees the change either, frozen or not: so Inductor's freezing pass
    (``torch._inductor.freezing.freeze``) must have frozen ``model.gain`` itself, read from the
    parameters of the Dynamo graph it is handed.

    Example:
        >>> check_frozen(lambda model, x: None)
        'Exercise 1: not answered yet.'
    """
    if compile_frozen is None:
        return check_answer(1, None, 0, hint="unused")
    if not callable(compile_frozen):
        raise TypeError(
            f"compile_frozen must be a function (model, x) -> compiled model; got {compile_frozen!r}"
        )
    torch._dynamo.reset()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GainedMLP().eval()
        x = torch.randn(8, 32)
    from torch._inductor import freezing

    # Inductor's freezing pass, torch._inductor.freezing.freeze(dynamo_gm, aot_autograd_gm, inputs),
    # runs once per graph compiled with freezing on (also when only options= turn it on). It makes
    # constants of the Dynamo graph's parameters, which are the traced model's own tensors; a graph
    # whose weights Dynamo made graph inputs has none.
    frozen_storages: set[int] = set()
    real_freeze = freezing.freeze

    def recorded_freeze(dynamo_gm: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
        frozen_storages.update(p.untyped_storage().data_ptr() for p in dynamo_gm.parameters())
        return real_freeze(dynamo_gm, *args, **kwargs)

    try:
        with CompileCounts() as first, mock.patch.object(freezing, "freeze", recorded_freeze):
            compiled = compile_frozen(model, x)
        if compiled is None and first.frames == 0:
            return check_answer(1, None, 0, hint="unused")
        assert callable(compiled), (
            "Exercise 1: compile_frozen returned no callable. Hint: return the compiled model"
        )
        assert first.frames >= 1, (
            "Exercise 1: compile_frozen compiled nothing. Hint: call the compiled model once inside "
            "compile_frozen, so that its first call compiles"
        )
        with torch.inference_mode(), CompileCounts() as again:
            before = compiled(x)
        assert again.frames == 0, (
            f"Exercise 1: calling your compiled model under torch.inference_mode() compiled {again.frames} "
            "frame(s) again, without the freezing global (Dynamo's guards tell inference mode from any "
            "other grad mode). Hint: make the first call the way the model is used later, under "
            "torch.inference_mode()"
        )
        expected_before = model(x).detach()
        torch.testing.assert_close(before, expected_before, rtol=1e-4, atol=1e-5)
        # A new input of the same shape: the compiled model must compute, not replay an output.
        x_new = x.flip(0)
        expected_new = model(x_new).detach()
        with torch.no_grad():
            model.gain.add_(1.0)
        try:
            with torch.inference_mode(), CompileCounts() as later:
                after = compiled(x_new)
            live = model(x_new).detach()
        finally:
            with torch.no_grad():
                model.gain.sub_(1.0)
        assert later.frames == 0, (
            f"Exercise 1: the call after the weight change compiled {later.frames} frame(s). Hint: "
            "make the first call the way the model is used later, under torch.inference_mode()"
        )
        if torch.allclose(after, live, rtol=1e-4, atol=1e-5):
            raise AssertionError(
                "Exercise 1: the compiled model saw a weight change (of gain, whose exp(gain) freezing "
                "folds into a constant), so its weights are graph inputs, not frozen. Hint: of section 3's "
                "three ways to freeze the MLP, only one froze it: what did it set, and around which call?"
            )
        try:
            torch.testing.assert_close(after, expected_new, rtol=1e-4, atol=1e-5)
        except AssertionError:
            raise AssertionError(
                "Exercise 1: on a new input the compiled model no longer computes the model with the "
                "weights it was compiled with. Hint: return the compiled model itself, not a stored output"
            ) from None
        assert model.gain.untyped_storage().data_ptr() in frozen_storages, (
            "Exercise 1: the compiled model did not see the weight change, but Inductor's freezing pass "
            "froze none of the given model's weights: it compiled other weights (a copy?), or froze "
            "no weights at all (options= only). Hint: compile the model you were given, frozen "
            "the way section 3 froze the MLP"
        )
    finally:
        torch._dynamo.reset()
    return (
        "Exercise 1: correct: the model's weights were frozen, and exp(gain) folded into a constant "
        "(a later change of gain is not seen)."
    )


def autotune_quiet_options() -> dict[str, Any]:
    """Inductor options that keep every GEMM autotuning run and print no autotuning table.

    No FX-graph cache and no autotuning cache (a cached compile tunes nothing), and no table on
    stderr (``autotune_num_choices_displayed=0``; ``max_autotune_report_choices_stats`` where
    the installed torch has it).

    Example:
        >>> autotune_quiet_options()["autotune_num_choices_displayed"]
        0
    """
    options: dict[str, Any] = {
        "fx_graph_cache": False,
        "autotune_local_cache": False,
        "autotune_num_choices_displayed": 0,
    }
    if hasattr(torch._inductor.config, "max_autotune_report_choices_stats"):
        options["max_autotune_report_choices_stats"] = False
    return options


def gemm_autotunings(fn: Callable[..., Any], *args: torch.Tensor) -> tuple[int, Any]:
    """Compile ``fn`` with max-autotune (no CUDA graphs), call it once: GEMM autotuning runs, result.

    Reads ``torch._dynamo.utils.counters["inductor"]["select_algorithm_autotune"]``: one per
    matrix multiply whose choices Inductor benchmarked. Resets Dynamo before and after.

    Example:
        >>> runs, _ = gemm_autotunings(lambda x, w: x @ w, torch.ones(4, 4), torch.ones(4, 4))
        >>> runs  # w is a graph input, not a constant: no C++ GEMM template, nothing to tune
        0
    """
    from torch._dynamo.utils import counters

    options = {"max_autotune": True, "coordinate_descent_tuning": True, **autotune_quiet_options()}
    torch._dynamo.reset()
    before = counters["inductor"]["select_algorithm_autotune"]
    try:
        with warnings.catch_warnings():
            # Inductor's CPU autotuner calls a deprecated storage API on some releases: not our code.
            warnings.filterwarnings("ignore", message="TypedStorage is deprecated")
            result = torch.compile(fn, options=options)(*args)
    finally:
        torch._dynamo.reset()
    return counters["inductor"]["select_algorithm_autotune"] - before, result


#: Exercise 2's inputs: a batch of 8 matrices and one weight.
BATCH = 8


#: Operations that only lay a result out again: the projection may end in them (einsum views and permutes).
_RESHAPES = {
    torch.ops.aten.view.default,
    torch.ops.aten._unsafe_view.default,
    torch.ops.aten.reshape.default,
    torch.ops.aten.clone.default,
    torch.ops.aten.permute.default,
    torch.ops.aten.transpose.int,
}


def _reads(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    """Whether ``source`` is among the nodes ``node`` is computed from."""
    seen, stack = set(), list(node.all_input_nodes)
    while stack:
        current = stack.pop()
        if current is source:
            return True
        if current not in seen:
            seen.add(current)
            stack.extend(current.all_input_nodes)
    return False


def check_autotuned(project: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None) -> str:
    """Exercise 2: ``project(x, w)`` computes ``x @ w`` for ``x`` (8, 64, 64) and ``w`` (64, 64)
    in a way that max-autotune tunes on a CPU without freezing.

    Right when the eager result equals ``x @ w``, compiling it with ``max_autotune`` benchmarked
    at least one GEMM (``gemm_autotunings``), and its ATen graph holds no 2-D ``mm``/``addmm``
    (the projection itself is the batched matmul).

    Example:
        >>> check_autotuned(None)
        'Exercise 2: not answered yet.'
    """
    if project is None:
        return check_answer(2, None, 0, hint="unused")
    if not callable(project):
        raise TypeError(f"project must be a function (x, w) -> tensor; got {project!r}")
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(BATCH, 64, 64, generator=generator)
    w = torch.randn(64, 64, generator=generator)
    expected = x @ w
    result = project(x, w)
    if not isinstance(result, torch.Tensor) or result.shape != expected.shape:
        raise AssertionError(
            f"Exercise 2: project(x, w) must return a tensor of shape {tuple(expected.shape)}; got "
            f"{getattr(result, 'shape', type(result).__name__)}. Hint: the result is x @ w"
        )
    try:
        torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-4)
    except AssertionError:
        raise AssertionError(
            "Exercise 2: project(x, w) does not compute x @ w. Hint: same result, other op"
        ) from None
    runs, compiled_result = gemm_autotunings(project, x, w)
    torch.testing.assert_close(compiled_result, expected, rtol=1e-3, atol=1e-3)
    assert runs >= 1, (
        "Exercise 2: max-autotune tuned no matrix multiply. Hint: on a CPU a 2-D matmul (x @ w, "
        "torch.matmul, a Linear) is tuned only when its weight is a constant (freezing); for the op "
        "that is tuned without, print inspect.getsource(torch._inductor.utils.use_cpp_bmm_template)"
    )
    # The tuned GEMM must be the projection itself, not an extra batched product beside a 2-D one.
    from torch.fx.experimental.proxy_tensor import make_fx

    plain_gemms = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}
    graph = make_fx(project)(x, w).graph
    untuned = sorted({str(node.target) for node in graph.nodes if node.target in plain_gemms})
    assert not untuned, (
        "Exercise 2: a batched matmul was tuned, but project(x, w) still multiplies with "
        f"{', '.join(untuned)}, a 2-D matrix multiply that max-autotune does not tune without "
        "freezing. Hint: make the projection itself the batched matmul"
    )
    weight = [node for node in graph.nodes if node.op == "placeholder"][1]  # project(x, w): w
    result = next(node for node in graph.nodes if node.op == "output").args[0]
    while isinstance(result, torch.fx.Node) and result.target in _RESHAPES:
        result = result.args[0]
    if not (
        isinstance(result, torch.fx.Node)
        and result.target == torch.ops.aten.bmm.default
        and _reads(result, weight)
    ):
        raise AssertionError(
            "Exercise 2: a batched matmul was tuned, but the result is not that batched matmul of w: "
            "the projection is computed another way. Hint: make the projection itself the batched matmul"
        )
    return f"Exercise 2: correct: max-autotune benchmarked {runs} GEMM(s) without freezing."
