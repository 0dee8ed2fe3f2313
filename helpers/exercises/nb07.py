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


#: The backend exercise 2 compiles with: AOTAutograd, Inductor's decompositions and its partitioner.
CHAIN_BACKEND = "aot_eager_decomp_partition"


def _described(saved: Any) -> str:
    return f"{saved.count} tensors, {saved.nbytes} bytes"


def check_saved_tensors(fn: Callable[..., torch.Tensor], saved: Any) -> str:
    """Exercise 2: ``fn(x, weight)`` computes ``exp(cos(sin(x @ weight))).sum()``; ``saved`` is the
    measurement itself: the ``SavedTensors`` that ``helpers.memory.saved_activations(...,
    exclude=[weight])`` returned for a call of ``fn`` compiled with ``backend=CHAIN_BACKEND`` on an
    ``x`` of shape (8, 16) and a (16, 16) ``weight`` (the notebook's ``chain_x`` and ``chain_weight``),
    both float32 and requiring gradients.

    The check runs ``fn`` eagerly against the exercise's function and its gradients, then measures on
    its own inputs of those shapes what eager autograd saves and what ``fn`` compiled with that backend
    saves, and compares both the count and the bytes of ``saved`` with the compiled forward's (the
    partitioner recomputes the cheap element-wise results from the matmul's output, so eager saves
    more). A number is refused whatever it is, since a small count can be found by trying numbers:
    pass the measurement. The check cannot tell a ``SavedTensors`` built by hand from a measured one;
    a measurement of something else is told what it measured instead where the check can tell (eager
    autograd, the weight included, nothing saved), never what the compiled forward saves.

    Example:
        >>> check_saved_tensors(lambda x, weight: torch.sin(x).cos().exp().sum(), None)
        'Exercise 2: not answered yet.'
    """
    from helpers.memory import SavedTensors, saved_activations

    if not callable(fn):
        raise TypeError(f"fn must be a function (x, weight) -> loss; got {type(fn).__name__}")
    if saved is None:
        return "Exercise 2: not answered yet."
    hint = (
        f"compile the changed function with backend={CHAIN_BACKEND!r}, and pass what "
        "saved_activations(lambda: compiled(chain_x, chain_weight), exclude=[chain_weight]) returns: "
        "a matmul is not recomputed, element-wise operations are"
    )
    if isinstance(saved, int) and not isinstance(saved, bool):
        raise wrong_answer(
            2,
            f"{saved} is a number typed in, not a measurement; pass the SavedTensors that "
            "saved_activations returned for your compiled call",
            hint,
        )
    if not isinstance(saved, SavedTensors):
        raise TypeError(
            "saved must be the SavedTensors that helpers.memory.saved_activations returns; "
            f"got {type(saved).__name__}"
        )
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
            "the matmul in front of the chain, then measure what the compiled forward saves."
        ) from error
    eager = saved_activations(lambda: _chain(x, weight), exclude=[weight])
    eager_with_weight = saved_activations(lambda: _chain(x, weight))
    torch._dynamo.reset()
    try:
        compiled_fn = torch.compile(fn, backend=CHAIN_BACKEND)
        compiled = saved_activations(lambda: compiled_fn(x, weight), exclude=[weight])
        compiled_with_weight = saved_activations(lambda: compiled_fn(x, weight))
    finally:
        torch._dynamo.reset()
    if compiled.count >= eager.count:  # the lesson's premise; a release that changed it must say so
        raise RuntimeError(
            f"the partitioner saved {_described(compiled)}, eager autograd {_described(eager)}: "
            "this release no longer recomputes the chain"
        )
    measured = (saved.count, saved.nbytes)
    if measured == (compiled.count, compiled.nbytes):
        return check_answer(2, measured, measured, hint=hint)
    if measured == (eager.count, eager.nbytes):
        what = "is what eager autograd saves: measure the call of the compiled function"
    elif measured in {(m.count, m.nbytes) for m in (eager_with_weight, compiled_with_weight)}:
        what = "counts the weight too: leave it out with exclude=[chain_weight]"
    elif saved.count == 0:
        what = (
            "found nothing saved for backward: call the compiled function on chain_x and chain_weight, "
            "which need gradients, inside saved_activations"
        )
    else:
        what = (
            f"is not what fn compiled with backend={CHAIN_BACKEND!r} saves on inputs shaped like chain_x "
            "and chain_weight, the weight excluded"
        )
    raise wrong_answer(2, f"your measurement ({_described(saved)}) {what}", hint)


#: Dynamo's recompile limits (the older names are aliases; a release has some of them).
_RECOMPILE_LIMITS = (
    "recompile_limit",
    "cache_size_limit",
    "accumulated_recompile_limit",
    "accumulated_cache_size_limit",
)

#: Exercise 3's schedule, one factor per parameter group: the body's learning rate decays, the head's stays.
SCHEDULE = (lambda step: 0.9**step, lambda step: 1.0)


def check_scheduled_optimizer(factory: Callable[..., Any] | None, steps: int = 4) -> str:
    """Exercise 3: ``factory(body_params, head_params)`` returns an AdamW with two parameter groups, the
    body's parameters first, both starting at ``START_LR``, whose compiled ``step()`` does not recompile
    while ``LambdaLR(optimizer, SCHEDULE)`` decays the body's learning rate (0.9 per step) and keeps the
    head's.

    The check reads where each group starts, runs ``steps`` compiled steps (``backend="eager"``) under
    that scheduler, counts recompilations and reads where each group's learning rate ended; it also
    checks that ``factory`` left Dynamo's recompile limits, ``assume_static_by_default`` and the compile
    stance as they were (the check puts them back), and that the step compiled a graph. A
    wrong answer's message names what is wrong, not the fix: a float the scheduler changes recompiles,
    and one object held by both groups takes every value the scheduler writes into it, so the body ends
    at the head's learning rate.

    Example:
        >>> check_scheduled_optimizer(None)
        'Exercise 3: not answered yet.'
        >>> check_scheduled_optimizer(lambda body, head: torch.optim.AdamW(
        ...     [{"params": body, "lr": torch.tensor(1e-3)}, {"params": head, "lr": torch.tensor(1e-3)}]))
        'Exercise 3: correct.'
    """
    if factory is None:
        return "Exercise 3: not answered yet."
    if not callable(factory):
        raise TypeError(
            "factory must be a function (body_params, head_params) -> optimizer; "
            f"got {type(factory).__name__}"
        )
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 2:
        raise ValueError(f"steps must be an int >= 2; got {steps!r}")
    import torch._dynamo.eval_frame as eval_frame

    from helpers.counters import CompileCounts

    torch.manual_seed(0)
    body, head = torch.nn.Linear(32, 32), torch.nn.Linear(32, 8)
    # Process-wide switches that hide a recompilation instead of avoiding it: put back, then refused.
    switches = [("torch._dynamo.config", name) for name in (*_RECOMPILE_LIMITS, "assume_static_by_default")]
    stance = eval_frame._stance  # torch.compiler.set_stance's setting
    with settings_kept(*switches) as changed:
        optimizer = factory(body.parameters(), head.parameters())
    if eval_frame._stance != stance:
        changed.append(f"torch.compiler.set_stance({eval_frame._stance.stance!r})")
        eval_frame._set_stance(stance)
    if changed:
        raise AssertionError(
            f"Exercise 3: the factory changed a process-wide compiler setting ({', '.join(changed)}; put "
            "back now), so a recompilation can be skipped or run eagerly instead of counted. Hint: leave "
            "the compiler's settings alone; make the optimizer's step need no recompilation (notebook 04)."
        )
    if optimizer is None:
        return "Exercise 3: not answered yet."
    if not isinstance(optimizer, torch.optim.AdamW):
        raise AssertionError(f"Exercise 3: return a torch.optim.AdamW; got {type(optimizer).__name__}.")
    groups = optimizer.param_groups
    held = [{id(p) for p in group["params"]} for group in groups]
    if held != [{id(p) for p in body.parameters()}, {id(p) for p in head.parameters()}]:
        raise AssertionError(
            f"Exercise 3: the optimizer holds {len(groups)} parameter group(s); it needs two, body_params "
            "in the first and head_params in the second, so that the scheduler can treat them apart."
        )
    starts = [float(group["lr"]) for group in groups]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, list(SCHEDULE))
    torch._dynamo.reset()

    @torch.compile(backend="eager")
    def optimizer_step() -> None:
        optimizer.step()

    x = torch.randn(4, 32)
    with CompileCounts() as counts:
        for _ in range(steps):
            head(body(x)).square().mean().backward()
            optimizer_step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
    if counts.graphs == 0:
        raise AssertionError(
            "Exercise 3: the compiled step compiled no graph, so the check has nothing to count. Hint: "
            "return the optimizer itself, and leave the compiler's settings alone."
        )
    ends = [float(group["lr"]) for group in groups]
    answer = {
        "body starts at START_LR": math.isclose(starts[0], START_LR, rel_tol=1e-6),
        "head starts at START_LR": math.isclose(starts[1], START_LR, rel_tol=1e-6),
        "recompilations": counts.recompilations,
        "body's lr followed its schedule": math.isclose(
            ends[0], starts[0] * SCHEDULE[0](steps), rel_tol=1e-5
        ),
        "head's lr followed its schedule": math.isclose(
            ends[1], starts[1] * SCHEDULE[1](steps), rel_tol=1e-5
        ),
    }
    expected = {key: True for key in answer} | {"recompilations": 0}
    hint = (
        "keep every learning rate the scheduler changes out of Dynamo's guards (section 3), and look "
        "at what each of optimizer.param_groups holds after a scheduler step"
    )
    wrong = [key for key in expected if answer[key] != expected[key]]
    if wrong == ["body's lr followed its schedule"] and groups[0]["lr"] is groups[1]["lr"]:
        raise wrong_answer(
            3,
            "the body's learning rate ended at the head's: both groups hold one and the same "
            "learning-rate object, and the scheduler writes each group's new value into it in turn",
            hint,
        )
    return check_answer(3, answer, expected, hint=hint)
