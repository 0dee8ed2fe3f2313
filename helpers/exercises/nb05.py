"""Self-checks for notebook 05's exercises: each compiles with Inductor and reads the cache's answer.

Every check compiles in a cache directory of its own (``torch._inductor.utils.fresh_cache()``),
so its hits and misses do not depend on what this machine compiled before, and it forgets what
it compiled in memory before and after (Dynamo's code and Inductor's loaded modules).
"""

from __future__ import annotations

import contextlib
import dis
import gc
import inspect
import types
from collections.abc import Callable, Iterator

import torch
from torch._inductor.codecache import CppPythonBindingsCodeCache, PyCodeCache
from torch._inductor.utils import clear_inductor_caches, fresh_cache

from helpers.counters import CompileCounts
from helpers.exercises import settings_kept

#: Compiled against eager within this tolerance (float32 on a CPU; Inductor's tanh may differ
#: from ATen's in the last bits).
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def activation(x: torch.Tensor) -> torch.Tensor:
    """Exercise 1's function: the one whose cache entry a refactoring must keep."""
    return torch.tanh(x) * 0.5 + 0.5


def _forget_all() -> None:
    torch.compiler.reset()
    clear_inductor_caches()


#: Instructions that say nothing about what a body computes: padding, no-ops, a generator's start.
_NOT_THE_BODY = frozenset({"CACHE", "EXTENDED_ARG", "NOP", "RESUME"})
_JUMPS = frozenset(op for name in ("hasjump", "hasjrel", "hasjabs") for op in getattr(dis, name, ()))
#: Instructions whose operand names a local, cell or free variable (3.13's pairs name two at once).
_NAMES_A_VARIABLE = frozenset(dis.haslocal) | frozenset(dis.hasfree)


def _variables(code: types.CodeType, instructions: list[dis.Instruction]) -> dict[str, tuple[str, int]]:
    """Each variable's name -> its place: an argument by its position, another variable by first use.

    So renaming a variable, or adding an argument the body never reads, leaves the body as it was,
    while ``b - a`` and ``a - b`` of ``(a, b)`` stay apart. (Renamed variables that a nested function
    captures may still differ: the closure lists them by name. ``activation`` captures none.)
    """
    kinds = ["argument"] * code.co_argcount + ["keyword-only argument"] * code.co_kwonlyargcount
    kinds += ["*args"] * bool(code.co_flags & inspect.CO_VARARGS)
    kinds += ["**kwargs"] * bool(code.co_flags & inspect.CO_VARKEYWORDS)
    arguments = code.co_varnames[: len(kinds)]
    places = {name: (kind, i) for i, (name, kind) in enumerate(zip(arguments, kinds, strict=True))}
    for instruction in instructions:
        if instruction.opcode in _NAMES_A_VARIABLE:
            value = instruction.argval
            for name in value if isinstance(value, tuple) else (value,):
                if isinstance(name, str) and name not in places:
                    places[name] = ("variable", len(places) - len(arguments))
    return places


def _body(code: types.CodeType) -> tuple[object, ...]:
    """A code object's instructions, each by name and value, its variables by place, not by name.

    Only the instructions: not the signature, so an argument the body never reads changes nothing,
    and a variable (an argument included) is compared by its place (see :func:`_variables`), not by
    its name. No index into the code object's tables: ``LOAD_CONST``'s operand is an index into
    ``co_consts``, whose layout depends on the docstring and on the Python version (3.14 no longer
    puts a ``None`` first in a function without one), so values are compared instead; a jump by the
    position of its target; a nested function by its own body. The docstring, the name and line
    numbers are left out.
    """
    instructions = list(dis.get_instructions(code))
    kept: list[dis.Instruction] = []
    position: dict[int, int] = {}  # an offset -> the index of the next instruction kept
    for instruction in instructions:
        position[instruction.offset] = len(kept)
        if instruction.opname not in _NOT_THE_BODY:
            kept.append(instruction)
    places = _variables(code, kept)
    steps = []
    for instruction in kept:
        value = instruction.argval
        if isinstance(value, types.CodeType):
            value = _body(value)
        elif instruction.opcode in _JUMPS and isinstance(value, int):
            value = position.get(value, value)
        elif instruction.opcode in _NAMES_A_VARIABLE:
            names = value if isinstance(value, tuple) else (value,)
            value = tuple(places.get(name, name) for name in names)
        steps.append((instruction.opname, type(value).__name__, value))
    return tuple(steps)


def _same_code(a: Callable[..., object], b: Callable[..., object]) -> bool:
    """Whether two functions have the same body (names, docstrings, unread arguments and line numbers aside).

    A compiled or ``functools.wraps``-decorated function is compared by the function it wraps.
    """
    a, b = inspect.unwrap(a), inspect.unwrap(b)
    ca, cb = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if not isinstance(ca, types.CodeType) or not isinstance(cb, types.CodeType):
        return False
    return _body(ca) == _body(cb)


#: What a watched :func:`activation` runs (see :func:`_watching_activation`): a function object of its
#: own with activation's code, so that it computes as before.
_activation_itself = types.FunctionType(activation.__code__, activation.__globals__, "activation")
_activation_calls: list[None] = []


def _recording_activation(*args: object, **kwargs: object) -> object:
    """The code :func:`activation` runs while watched: note the call, then compute as before."""
    _activation_calls.append(None)
    return _activation_itself(*args, **kwargs)


@contextlib.contextmanager
def _watching_activation() -> Iterator[list[None]]:
    """Within the block, every call of the function object :func:`activation` is noted in the list.

    However a wrapper reaches it (a global name, a default argument, a closure, a dict,
    ``globals()["activation"]``, ``functools.partial``), the call runs ``activation.__code__``: the
    block swaps that for :func:`_recording_activation`'s and puts it back at the end, even on an error.
    """
    original = activation.__code__
    _activation_calls.clear()
    activation.__code__ = _recording_activation.__code__
    try:
        yield _activation_calls
    finally:
        activation.__code__ = original


def _copies_of_activation() -> list[types.FunctionType]:
    """Function objects other than :func:`activation` that run its code, built from its code object.

    The watch swaps ``activation.__code__`` only: a copy such as
    ``types.FunctionType(activation.__code__, activation.__globals__)`` keeps the code unwatched.
    (``type(f) is``, not ``isinstance``, so that no proxy object's ``__class__`` runs.)
    """
    code = _activation_itself.__code__
    return [
        f
        for f in gc.get_objects()
        if type(f) is types.FunctionType and f.__code__ == code and f not in (activation, _activation_itself)
    ]


def _calls_activation(candidate: Callable[[torch.Tensor], object], x: torch.Tensor) -> bool:
    """Whether calling ``candidate(x)`` (eagerly, even when compiled) calls :func:`activation`."""
    with _watching_activation() as calls, torch.compiler.set_stance("force_eager"):
        candidate(x)
    return bool(calls)


def check_refactor(candidate: Callable[[torch.Tensor], torch.Tensor] | None) -> str:
    """Exercise 1: a rewrite of :func:`activation` that keeps its FX graph cache entry.

    In a fresh cache directory, compile ``activation`` (a miss: it writes the entry), forget
    everything in memory, then compile ``candidate`` on the same input. Right when the body
    differs from ``activation``'s (a compiled ``activation`` does not count), calling it, eagerly or
    compiled, never calls ``activation`` (a wrapper, however it finds it), no copy of ``activation``
    built from its code object is in memory (a wrapper could call it unseen), the values match it
    (within :data:`TOLERANCE`), and the FX graph cache hit with no miss. A wrong answer raises
    ``AssertionError`` saying which failed.

    Example:
        >>> check_refactor(None)
        'Exercise 1: not answered yet.'
    """
    if candidate is None:
        return "Exercise 1: not answered yet."
    if not callable(candidate):
        raise TypeError(f"candidate must be a function of one tensor; got {type(candidate).__name__}")
    assert inspect.isfunction(inspect.unwrap(candidate)), (
        f"Exercise 1: candidate is a {type(candidate).__name__}, not a function with its own body, so "
        "nothing was refactored. Hint: write a def that computes the same values in its body"
    )
    assert not _same_code(candidate, activation), (
        "Exercise 1: candidate has the same body as activation. Hint: change how it is written "
        "(a local variable, a helper function); a comment, new names or an argument the body never "
        "reads leave the body as it was"
    )
    calls_activation = (
        "Exercise 1: candidate calls activation itself, so its graph is activation's by "
        "construction. Hint: write the computation out in the body, differently"
    )
    x = torch.linspace(-3.0, 3.0, 16)
    assert not _calls_activation(candidate, x), calls_activation
    assert not _copies_of_activation(), (
        "Exercise 1: a copy of activation (a function built from its code object) is in memory; "
        "calling a copy of activation's code is not a refactor. Hint: write the computation out in "
        "a def of your own"
    )
    with fresh_cache():
        _forget_all()
        torch.compile(activation)(x)
        _forget_all()
        with CompileCounts() as counts, _watching_activation() as calls:  # and when compiled
            result = torch.compile(candidate)(x)
        _forget_all()
    assert not calls, calls_activation
    try:
        torch.testing.assert_close(result, activation(x), **TOLERANCE)
    except AssertionError:
        raise AssertionError(
            "Exercise 1: candidate computes other values than activation. Hint: a refactoring keeps "
            "the result; change how the code reads, not what it computes"
        ) from None
    hits, misses = counts.fxgraph_cache_hits, counts.fxgraph_cache_misses
    assert hits == 1 and misses == 0, (
        f"Exercise 1: the FX graph cache had {hits} hit(s) and {misses} miss(es); one hit was "
        "expected. Hint: the key is the captured graph, so the same values from other operations "
        "(or a graph break) are a new entry"
    )
    aot = "hit" if counts.autograd_cache_hits else "missed"
    return f"Exercise 1: correct: same values, the FX graph cache hit (the AOTAutograd cache {aot})."


def _cosine(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) * 2 + 1


#: The settings that switch the disk caches on and off: (config module, name), where the release has it.
_CACHE_SETTINGS = (
    ("torch._inductor.config", "fx_graph_cache"),
    ("torch._inductor.config", "force_disable_caches"),
    ("torch._functorch.config", "enable_autograd_cache"),
)


def check_forget(forget: Callable[[], object] | None) -> str:
    """Exercise 2: ``forget()`` lets this process compile again as a fresh one would, from disk.

    In a fresh cache directory, compile a small function and call it, call ``forget()``, then
    call the same compiled function again. ``forget()`` must leave the disk caches' settings as it
    found them (the check puts them back if not). Right when Dynamo traced it again (one frame
    compiled), no module Inductor loaded for the first compile is still in memory, and the FX
    graph cache hit (the entry on disk answered). A wrong answer raises ``AssertionError``.

    Example:
        >>> check_forget(None)
        'Exercise 2: not answered yet.'
    """
    if forget is None:
        return "Exercise 2: not answered yet."
    if not callable(forget):
        raise TypeError(f"forget must be a function of no arguments; got {type(forget).__name__}")
    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    with fresh_cache():
        _forget_all()
        compiled = torch.compile(_cosine)
        before = {id(module) for module in PyCodeCache.modules}
        libraries_before = set(CppPythonBindingsCodeCache.cache)
        compiled(x)
        loaded = [module for module in PyCodeCache.modules if id(module) not in before]
        libraries = set(CppPythonBindingsCodeCache.cache) - libraries_before  # C++ kernels, on a CPU
        if not loaded:  # pragma: no cover - a release that no longer lists its loaded modules
            raise RuntimeError("this torch lists no module loaded for the compile: the check cannot tell")
        with settings_kept(*_CACHE_SETTINGS) as changed:
            forget()
        assert not changed, (
            "Exercise 2: forget() changed a disk-cache setting, so the next compile does not read the "
            "cache as a fresh process would. Hint: forget what is in memory; leave the settings alone"
        )
        still_loaded = sum(1 for module in loaded if any(module is m for m in PyCodeCache.modules))
        still_loaded += len(libraries & set(CppPythonBindingsCodeCache.cache))
        with CompileCounts() as counts:
            compiled(x)
        _forget_all()
    assert counts.frames == 1, (
        f"Exercise 2: Dynamo compiled {counts.frames} frame(s) after forget(); it reused the code it "
        "had compiled, so nothing was forgotten. Hint: start with Dynamo's reset"
    )
    assert still_loaded == 0, (
        "Exercise 2: what Inductor loaded for the first compile (its module or kernel library) is "
        "still in memory. "
        "Hint: torch.compiler.reset() clears Dynamo only; torch._inductor.utils has the "
        "function that clears Inductor's in-memory caches"
    )
    assert counts.fxgraph_cache_hits == 1, (
        f"Exercise 2: the FX graph cache had {counts.fxgraph_cache_hits} hit(s) and "
        f"{counts.fxgraph_cache_misses} miss(es). Hint: forget what is in memory, keep what is on disk"
    )
    return "Exercise 2: correct: Dynamo traced again, nothing stayed in memory, and the disk cache hit."
