"""Self-checks for notebook 01's exercises: a version guard, a fused kernel, an ATen graph.

Each check takes what the learner wrote, compiles where the exercise compiles, and compares the
compiler fact it reads with the learner's answer through :func:`helpers.exercises.check_answer`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
from packaging.version import Version

from helpers.exercises import check_answer
from helpers.logs import generated_code

#: (installed version, minimum release) -> does the course's rule say "at least"? A floor check
#: like the guard's torch >= 2.0, where a snapshot or release candidate counts as the release it
#: leads to (not a test for one fix: a snapshot may predate it). Each case catches a realistic
#: wrong rule: plain strings ("10.0" < "2.5.1"), (major, minor) only (2.5.0 passes 2.5.1),
#: strict ">" (2.5.1 fails 2.5.1), full PEP 440 order (2.6.0a0 fails 2.6), release tuples
#: compared as they are ((2, 5) < (2, 5, 0), though 2.5 and 2.5.0 are one release).
VERSION_CASES: dict[tuple[str, str], bool] = {
    ("10.0", "2.5.1"): True,
    ("2.13.0+cpu", "2.5.1"): True,
    ("2.5.1", "2.5.1"): True,
    ("2.5.0", "2.5.1"): False,
    ("2.4.1", "2.5"): False,
    ("1.13.1", "2"): False,
    ("2.6.0a0+ecf3bae", "2.6"): True,
    ("2.5", "2.5.0"): True,
    ("2.10.0.dev20250901+cu128", "2.10"): True,  # a nightly
    ("2.5.1rc1", "2.5.1"): True,  # a release candidate
    ("2.6.0b1", "2.6"): True,
    ("2.4.0.dev20240601", "2.5"): False,
}

_FUSED_KERNEL = re.compile(r"^(cpp_fused_\w+)\s*=\s*async_compile\.", re.MULTILINE)
_LIBRARY_CALL = re.compile(r"\bextern_kernels\.\w+\(")


def _course_rule(version: str, minimum: str) -> bool:
    def base(text: str) -> Version:
        return Version(Version(text).base_version)

    return base(version) >= base(minimum)


def _call(candidate: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # A learner's function that raises on a case gives a wrong answer for it, not a crash.
    try:
        return candidate(*args)
    except Exception as error:  # noqa: BLE001 - any failure is reported as the answer
        return f"raised {type(error).__name__}: {error}"


def check_version_guard(candidate: Callable[[str, str], bool | None], *, exercise: int = 1) -> str:
    """Feed ``candidate(version, minimum)`` into a guarded compile and count the graphs compiled.

    For each case of :data:`VERSION_CASES` the check compiles a small function with
    ``torch._dynamo.testing.CompileCounter`` as the backend where ``candidate`` says yes, calls
    it, and records how many graphs the backend received (1 compiled, 0 ran eagerly). Those
    counts must match the course's rule: base versions, parsed.

    Example:
        >>> from helpers.guard import parse_version
        >>> check_version_guard(lambda v, m: None)
        'Exercise 1: not answered yet.'
        >>> check_version_guard(lambda v, m: parse_version(v) >= parse_version(m))
        'Exercise 1: correct.'
    """
    if not callable(candidate):
        raise TypeError(
            f"candidate must be a function (version, minimum) -> bool; got {type(candidate).__name__}"
        )
    from torch._dynamo.testing import CompileCounter

    answers = {case: _call(candidate, case) for case in VERSION_CASES}
    if all(answer is None for answer in answers.values()):
        return check_answer(exercise, answers, VERSION_CASES, hint="unused")

    def small(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) + 1

    compiled_graphs: dict[tuple[str, str], Any] = {}
    for case, says_yes in answers.items():
        if not isinstance(says_yes, bool):
            compiled_graphs[case] = f"{says_yes!r} (not a bool)"
            continue
        counter = CompileCounter()  # a backend that counts the graphs it receives
        torch._dynamo.reset()
        guarded = torch.compile(small, backend=counter) if says_yes else small
        guarded(torch.ones(2))
        compiled_graphs[case] = counter.frame_count
    torch._dynamo.reset()
    expected = {case: int(_course_rule(*case)) for case in VERSION_CASES}
    assert expected == {case: int(want) for case, want in VERSION_CASES.items()}
    return check_answer(
        exercise,
        compiled_graphs,
        expected,
        hint="the numbers are the graphs compiled per (version, minimum), 1 where your function said "
        "yes; under the course's rule (section 4), which of these builds count as their release?",
    )


def _reference_tail(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    h = torch.nn.functional.gelu(x @ weight) + x
    return torch.nn.functional.layer_norm(h, h.shape[-1:])


def kernel_counts(code: str) -> tuple[int, int]:
    """(fused C++ kernels defined, library calls made) in one program Inductor generated.

    A fused kernel is a ``cpp_fused_...`` definition; a library call is an
    ``extern_kernels.<name>(`` call (a matmul in MKL/oneDNN, for instance).

    Example:
        >>> program = "cpp_fused_add_0 = async_compile.cpp_pybinding(...)\\n"
        >>> kernel_counts(program + "extern_kernels.mm(a, b, out=c)")
        (1, 1)
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be the generated program (a str); got {type(code).__name__}")
    return len(set(_FUSED_KERNEL.findall(code))), len(_LIBRARY_CALL.findall(code))


def check_kernel_counts(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    counts: tuple[int, int] | None,
    *,
    exercise: int = 2,
) -> str:
    """Check ``fn`` ends with a layer norm, compile it with Inductor, compare ``counts`` with its code.

    ``fn(x, weight)`` must compute ``layer_norm(gelu(x @ weight) + x)`` over the last dimension
    (checked eagerly first). ``counts`` is the learner's reading of the generated program:
    ``(fused C++ kernels, library calls)``, as :func:`kernel_counts` counts them. Needs a
    working C++ compiler (Inductor on a CPU).

    Example:
        >>> check_kernel_counts(lambda x, w: x, None)
        'Exercise 2: not answered yet.'
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function (x, weight) -> tensor; got {type(fn).__name__}")
    if counts is None:
        return check_answer(exercise, None, (0, 0), hint="unused")
    if (
        not isinstance(counts, tuple)
        or len(counts) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in counts)
    ):
        raise TypeError(f"counts must be a tuple of two ints (fused kernels, library calls); got {counts!r}")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 128, generator=generator)
    weight = torch.randn(128, 128, generator=generator) / 128**0.5
    try:
        torch.testing.assert_close(fn(x, weight), _reference_tail(x, weight), rtol=1e-5, atol=1e-5)
    except (AssertionError, RuntimeError, TypeError) as error:
        raise AssertionError(
            f"Exercise {exercise}: fn does not compute layer_norm(gelu(x @ weight) + x) yet; add the "
            "layer norm over the last dimension, then count the kernels of the changed function."
        ) from error
    torch._dynamo.reset()
    with generated_code() as programs:
        torch.compile(fn)(x, weight)
    torch._dynamo.reset()
    observed = tuple(map(sum, zip(*(kernel_counts(code) for code in programs), strict=True))) or (0, 0)
    return check_answer(
        exercise,
        counts,
        observed,
        hint="count kernels, not operations: one cpp_fused_ definition can hold several ops; "
        "a matmul stays a call into a library",
    )


def _reference_softmax_tail(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.nn.functional.gelu(x @ weight) + x, dim=-1)


def aten_ops(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *args: torch.Tensor) -> list[str]:
    """The ATen operators, in order, of the forward graph AOTAutograd hands a backend for ``fn(*args)``.

    Compiles ``fn`` with ``aot_autograd(fw_compiler=...)`` around a backend that keeps the graph,
    calls it once, and returns ``str(node.target)`` of each ``call_function`` node, the way
    notebook 01's section 1 prints them.

    Example:
        >>> aten_ops(lambda x, w: x @ w + x, torch.randn(4, 8), torch.randn(8, 8))
        ['aten.mm.default', 'aten.add.Tensor']
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function of tensors; got {type(fn).__name__}")
    from torch._dynamo.backends.common import aot_autograd

    graphs: list[torch.fx.GraphModule] = []

    def keep(graph_module: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=aot_autograd(fw_compiler=keep))(*args)
    finally:
        torch._dynamo.reset()
    return [str(node.target) for gm in graphs for node in gm.graph.nodes if node.op == "call_function"]


def check_aten_ops(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ops: list[str] | tuple[str, ...] | None,
    *,
    exercise: int = 3,
) -> str:
    """Check ``fn`` ends with a softmax, compile it through AOTAutograd, compare ``ops`` with its graph.

    ``fn(x, weight)`` must compute ``softmax(gelu(x @ weight) + x, dim=-1)`` (checked eagerly
    first) on a batch of sequences, ``x`` of shape ``(2, 4, 8)``. ``ops`` is the learner's reading
    of the ATen graph AOTAutograd gives the backend for that call: the operators in order, as
    ``str(node.target)`` prints them (``"aten.mm.default"``), what :func:`aten_ops` returns.

    Example:
        >>> check_aten_ops(lambda x, w: x, None)
        'Exercise 3: not answered yet.'
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function (x, weight) -> tensor; got {type(fn).__name__}")
    if ops is None:
        return check_answer(exercise, None, [], hint="unused")
    if (
        isinstance(ops, str)
        or not isinstance(ops, (list, tuple))
        or not all(isinstance(op, str) for op in ops)
    ):
        raise TypeError(f"ops must be a list of operator names (str), such as 'aten.mm.default'; got {ops!r}")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 8, generator=generator)
    weight = torch.randn(8, 8, generator=generator)
    try:
        torch.testing.assert_close(fn(x, weight), _reference_softmax_tail(x, weight), rtol=1e-5, atol=1e-5)
    except (AssertionError, RuntimeError, TypeError) as error:
        raise AssertionError(
            f"Exercise {exercise}: fn does not compute softmax(gelu(x @ weight) + x, dim=-1) on a (2, 4, 8) "
            "batch yet; add the softmax over the last dimension, then read the graph of the changed function."
        ) from error
    return check_answer(
        exercise,
        list(ops),
        aten_ops(fn, x, weight),
        hint="compile the changed function through aot_autograd on a (2, 4, 8) input and print "
        "str(node.target) of each call_function node: ATen names, not the names in your code, and a "
        "matmul on a 3-D input is more than one ATen operator",
    )
