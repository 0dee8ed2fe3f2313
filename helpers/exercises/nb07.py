"""Self-checks for notebook 07 (training): each compiles the learner's code and reads a compiler fact."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from helpers.exercises import check_answer, settings_kept, wrong_answer

#: The learning rate exercise 3's optimizer must start at.
START_LR = 1e-3


def _layer_loss(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ weight).sum()


def check_backward_compiled_early(compile_fn: Callable[..., Any] | None) -> str:
    """Exercise 1: ``compile_fn(fn, backend)`` must compile ``fn`` so that AOTAutograd compiles its
    backward graph during the first forward call, not at the first ``backward()``.

    The check hands ``compile_fn`` a function ``gelu(x @ weight).sum()`` and a backend that records
    when AOTAutograd compiles the forward and the backward graph, calls the result once, and then
    calls ``backward()``. AOTAutograd compiles the backward early when the backward needs symbolic
    sizes saved by the forward (``num_symints_saved_for_bw > 0``). Only the check's own calls count:
    ``compile_fn`` must return without having compiled anything (a warm-up call with a ``backward()``
    inside it would compile both graphs before the forward the check watches), and the forward call
    must not run the backward itself (``backward()`` or ``torch.autograd.grad``).

    Example:
        >>> check_backward_compiled_early(None)
        'Exercise 1: not answered yet.'
        >>> check_backward_compiled_early(lambda fn, be: torch.compile(fn, backend=be, dynamic=True))
        'Exercise 1: correct.'
    """
    if compile_fn is None:
        return "Exercise 1: not answered yet."
    if not callable(compile_fn):
        raise TypeError(
            f"compile_fn must be a function (fn, backend) -> compiled fn; got {type(compile_fn).__name__}"
        )
    import torch._functorch.config as config
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    # Releases from 2.13 on have a global switch that compiles every backward early; it is no answer,
    # set for good or only around the compiled call (config.patch): read while the graphs compile.
    switch = "force_non_lazy_backward_lowering"
    compiled: list[str] = []
    switched_on: list[bool] = []
    ran: list[str] = []  # every run of a compiled graph, so a backward run inside the forward call shows

    def recorder(label: str) -> Callable[..., Any]:
        def compiler(graph_module: torch.fx.GraphModule, example_inputs: Any) -> Any:
            compiled.append(label)
            switched_on.append(bool(getattr(config, switch, False)))

            def run(*args: Any) -> Any:
                ran.append(label)
                return graph_module.forward(*args)

            return make_boxed_func(run)

        return compiler

    backend = aot_autograd(fw_compiler=recorder("forward"), bw_compiler=recorder("backward"))
    torch._dynamo.reset()
    switch_before = getattr(config, switch, False)
    no_answer = AssertionError(
        f"Exercise 1: compile_fn switched on torch._functorch.config.{switch}, a global setting that "
        "compiles every backward early, everywhere it is on. Hint: make the sizes symbolic instead "
        "(notebook 04)"
    )
    hint = (
        "compile with the backend you are given, so that the backward needs a size the forward "
        "must save for it: look for the compile option that makes sizes symbolic (notebook 04)"
    )
    # A global setting that makes every later compile dynamic is no answer either; put back, then refused.
    process_wide = ("torch._dynamo.config", "assume_static_by_default")
    global_setting = (
        "compile_fn left torch._dynamo.config.assume_static_by_default changed, a global setting that "
        "makes every later compile in this process dynamic (put back now). Hint: make the sizes "
        "symbolic for this compile only (notebook 04)"
    )
    with settings_kept(process_wide) as changed:
        compiled_fn = compile_fn(_layer_loss, backend)
    if changed:
        raise AssertionError(f"Exercise 1: {global_setting}")
    if getattr(config, switch, False) != switch_before:
        setattr(config, switch, switch_before)  # switched back for the rest of the process
        raise no_answer
    if compiled_fn is None:
        return "Exercise 1: not answered yet."
    if any(switched_on):
        raise no_answer
    if compiled:
        raise wrong_answer(
            1,
            "graphs were compiled before compile_fn returned (it called the function it compiles), so "
            "the check cannot see when the backward is compiled; return the compiled function uncalled",
            hint,
        )
    torch.manual_seed(0)
    x, weight = torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)
    with settings_kept(process_wide) as changed:
        loss = compiled_fn(x, weight)
    if changed:
        raise AssertionError(f"Exercise 1: {global_setting}")
    after_forward = list(compiled)
    if any(switched_on):
        raise no_answer
    if weight.grad is not None or "backward" in ran:  # .backward() or torch.autograd.grad inside
        raise wrong_answer(
            1,
            "the function compile_fn returned ran the backward itself during the forward call; "
            "return the compiled function, and let the check call backward()",
            hint,
        )
    loss.backward()
    torch.testing.assert_close(loss, _layer_loss(x, weight), rtol=1e-5, atol=1e-5)
    answer = {
        "graphs compiled by the given backend": len(compiled),
        "backward compiled during the forward call": "backward" in after_forward,
    }
    expected = {"graphs compiled by the given backend": 2, "backward compiled during the forward call": True}
    return check_answer(1, answer, expected, hint=hint)


def _chain(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.sin(x @ weight).cos().exp().sum()


def check_saved_tensors(fn: Callable[..., torch.Tensor], count: int | None) -> str:
    """Exercise 2: ``fn(x, weight)`` computes ``exp(cos(sin(x @ weight))).sum()``; ``count`` is how many
    tensors its forward saves for backward when compiled with ``backend="aot_eager_decomp_partition"``,
    the weight excluded, as ``helpers.memory.saved_activations`` counts them.

    The check runs ``fn`` eagerly on ``x`` of shape (8, 16) and a (16, 16) ``weight``, both requiring
    gradients, then compiles it with that backend and counts. Eager autograd saves more than the
    partitioner, which recomputes the cheap element-wise results from the matmul's output. A wrong
    count is told only that it is wrong (or that it is eager's count): never higher or lower, so the
    answer cannot be found by trying numbers.

    Example:
        >>> check_saved_tensors(lambda x, weight: torch.sin(x).cos().exp().sum(), None)
        'Exercise 2: not answered yet.'
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function (x, weight) -> loss; got {type(fn).__name__}")
    if count is None:
        return "Exercise 2: not answered yet."
    if not isinstance(count, int) or isinstance(count, bool):
        raise TypeError(f"count must be a whole number of tensors; got {type(count).__name__}")
    from helpers.memory import saved_activations

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=generator).requires_grad_()
    weight = (torch.randn(16, 16, generator=generator) / 4).requires_grad_()
    try:
        torch.testing.assert_close(fn(x, weight), _chain(x, weight), rtol=1e-5, atol=1e-5)
        # The gradients too: a chain that detaches the weight, or runs under no_grad, saves less.
        got = torch.autograd.grad(fn(x, weight), (x, weight))
        torch.testing.assert_close(got, torch.autograd.grad(_chain(x, weight), (x, weight)))
    except (AssertionError, RuntimeError, TypeError) as error:
        raise AssertionError(
            "Exercise 2: fn does not compute exp(cos(sin(x @ weight))).sum() and its gradients yet; put "
            "the matmul in front of the chain, then count what the compiled forward saves."
        ) from error
    eager_count = saved_activations(lambda: _chain(x, weight), exclude=[weight]).count
    torch._dynamo.reset()
    try:
        compiled = torch.compile(fn, backend="aot_eager_decomp_partition")
        compiled_count = saved_activations(lambda: compiled(x, weight), exclude=[weight]).count
    finally:
        torch._dynamo.reset()
    if compiled_count >= eager_count:  # the lesson's premise; a release that changed it must say so
        raise RuntimeError(
            f"the partitioner saved {compiled_count} tensors, eager autograd {eager_count}: "
            "this release no longer recomputes the chain"
        )
    hint = (
        "compile the changed function with the backend named, call it on inputs that need "
        "gradients, and count with saved_activations(..., exclude=[weight]): a matmul is not "
        "recomputed, element-wise operations are"
    )
    if count == compiled_count:
        return check_answer(2, count, compiled_count, hint=hint)
    if count == eager_count:
        raise wrong_answer(
            2, f"{count} is what eager autograd saves, not what the compiled forward saves", hint
        )
    raise wrong_answer(2, f"{count} is not what the compiled forward saves, the weight excluded", hint)


#: Dynamo's recompile limits (the older names are aliases; a release has some of them).
_RECOMPILE_LIMITS = (
    "recompile_limit",
    "cache_size_limit",
    "accumulated_recompile_limit",
    "accumulated_cache_size_limit",
)


def check_scheduled_optimizer(factory: Callable[[Any], Any] | None, steps: int = 4) -> str:
    """Exercise 3: ``factory(params)`` returns an AdamW starting at ``START_LR`` whose compiled
    ``step()`` does not recompile while a scheduler changes the learning rate.

    The check reads the starting learning rate (it must be ``START_LR``, held in a tensor, whose
    value no guard reads), then runs ``steps`` compiled steps (``backend="eager"``) under
    ``LambdaLR(0.9 ** step)`` and counts recompilations; it also checks that the scheduler really
    changed the learning rate, and that ``factory`` left Dynamo's recompile limits as they were
    (the check puts them back). A wrong answer's message names what is wrong, not the fix.

    Example:
        >>> check_scheduled_optimizer(None)
        'Exercise 3: not answered yet.'
        >>> check_scheduled_optimizer(lambda params: torch.optim.AdamW(params, lr=torch.tensor(1e-3)))
        'Exercise 3: correct.'
    """
    if factory is None:
        return "Exercise 3: not answered yet."
    if not callable(factory):
        raise TypeError(f"factory must be a function params -> optimizer; got {type(factory).__name__}")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 2:
        raise ValueError(f"steps must be an int >= 2; got {steps!r}")
    from helpers.counters import CompileCounts

    torch.manual_seed(0)
    model = torch.nn.Linear(32, 32)
    with settings_kept(*(("torch._dynamo.config", name) for name in _RECOMPILE_LIMITS)) as changed:
        optimizer = factory(model.parameters())
    if changed:
        raise AssertionError(
            "Exercise 3: the factory changed Dynamo's recompile limit, so a recompilation can be "
            "skipped instead of counted. Hint: leave the limits alone; make the optimizer's step need "
            "no recompilation (notebook 04)."
        )
    if optimizer is None:
        return "Exercise 3: not answered yet."
    if not isinstance(optimizer, torch.optim.AdamW):
        raise AssertionError(f"Exercise 3: return a torch.optim.AdamW; got {type(optimizer).__name__}.")
    start = optimizer.param_groups[0]["lr"]
    is_tensor = isinstance(start, torch.Tensor)
    start_value = float(start)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.9**step)
    torch._dynamo.reset()

    @torch.compile(backend="eager")
    def optimizer_step() -> None:
        optimizer.step()

    x = torch.randn(4, 32)
    with CompileCounts() as counts:
        for _ in range(steps):
            model(x).square().mean().backward()
            optimizer_step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
    end_value = float(optimizer.param_groups[0]["lr"])
    answer = {
        "starts at START_LR": math.isclose(start_value, START_LR, rel_tol=1e-6),
        "lr value out of the guards": is_tensor,
        "scheduler changed lr": math.isclose(end_value, START_LR * 0.9**steps, rel_tol=1e-5),
        "recompilations": counts.recompilations,
    }
    expected = {
        "starts at START_LR": True,
        "lr value out of the guards": True,
        "scheduler changed lr": True,
        "recompilations": 0,
    }
    return check_answer(
        3,
        answer,
        expected,
        hint=f"start at {START_LR:g}, and hold the value where a guard does not read it (notebook 04)",
    )
