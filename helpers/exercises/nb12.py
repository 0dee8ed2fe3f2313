"""Self-checks for notebook 12's exercises: each takes the learner's custom operator and tests it.

Both exercises wrap a NumPy "library" function (below) as a ``torch.library.custom_op``. The
checks run ``torch.library.opcheck`` and a ``fullgraph=True`` compile with ``backend="eager"``
(Dynamo and fake tensors only: no C++ compiler needed), and say what is wrong without giving the
expected shapes or declarations away.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from helpers.counters import CompileCounts

#: The table both exercises' library functions read: a tanh at 13 points.
KNOTS = np.linspace(-3.0, 3.0, 13)
VALUES = np.tanh(KNOTS)


def pairwise_mean(x: torch.Tensor) -> torch.Tensor:
    """Exercise 1's library function: the mean of each pair of neighbours along the last dimension.

    Written with NumPy, so Dynamo cannot trace it. The last dimension must be even.

    Example:
        >>> pairwise_mean(torch.tensor([[1.0, 3.0, 5.0, 7.0]]))
        tensor([[2., 6.]])
    """
    array = x.detach().cpu().numpy()
    pairs = array.reshape(*array.shape[:-1], array.shape[-1] // 2, 2)
    return torch.from_numpy(np.ascontiguousarray(pairs.mean(axis=-1))).to(x)


def lookup_into(out: torch.Tensor, x: torch.Tensor) -> None:
    """Exercise 2's library function: writes the table lookup of ``x`` into ``out`` (NumPy, in place).

    Example:
        >>> out = torch.empty(3)
        >>> lookup_into(out, torch.tensor([-9.0, 0.0, 9.0]))
        >>> [round(v, 3) for v in out.tolist()]
        [-0.995, 0.0, 0.995]
    """
    np.copyto(out.detach().numpy(), np.interp(x.detach().numpy(), KNOTS, VALUES), casting="same_kind")


def _quiet() -> contextlib.redirect_stdout:
    return contextlib.redirect_stdout(io.StringIO())


def _as_overload(op: Any) -> torch._ops.OpOverload | None:
    """The ``OpOverload`` behind a ``custom_op`` result or ``torch.ops.ns.name(.default)``, else None."""
    if isinstance(op, torch._library.custom_ops.CustomOpDef):
        return op._opoverload
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op.default
    if isinstance(op, torch._ops.OpOverload):
        return op
    return None


def _custom_overload(exercise: int, op: Any) -> torch._ops.OpOverload:
    overload = _as_overload(op)
    if overload is None:
        raise AssertionError(
            f"Exercise {exercise}: this is a {type(op).__name__}, not a custom operator. Hint: decorate the "
            "function with @torch.library.custom_op('course::...', mutates_args=...)"
        )
    if overload.namespace in {"aten", "prims"}:
        raise AssertionError(
            f"Exercise {exercise}: {overload} is a built-in operator. Hint: define your own with "
            "torch.library.custom_op"
        )
    return overload


def _fake_outputs(op: Any, args: tuple[Any, ...]) -> tuple[Any, str]:
    """What ``op`` returns under fake tensors (the fake kernel), or the error's first line."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    fake_args = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
    try:
        with mode:
            return op(*fake_args), ""
    except Exception as error:  # noqa: BLE001 - any failure of the learner's fake kernel is reported
        lines = str(error).strip().splitlines()
        return None, f"{type(error).__name__}: {lines[0] if lines else ''}"


def _fullgraph_error(fn: Callable[..., Any], *args: Any) -> tuple[str, CompileCounts]:
    """Compile ``fn`` with ``fullgraph=True`` (``backend="eager"``), call it; the error's first line or ""."""
    torch._dynamo.reset()
    counts = CompileCounts()
    try:
        with _quiet(), counts:
            torch.compile(fn, backend="eager", fullgraph=True)(*args)
    except Exception as error:  # noqa: BLE001 - Dynamo's errors differ between releases
        lines = str(error).strip().splitlines()
        return f"{type(error).__name__}: {lines[0] if lines else ''}", counts
    finally:
        torch._dynamo.reset()
    return "", counts


def _exercise_1_samples() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(12)
    return {
        "a (4, 16) float32 input": torch.randn(4, 16, generator=generator),
        "a (2, 3, 8) float64 input": torch.randn(2, 3, 8, generator=generator, dtype=torch.float64),
        "a (6,) float32 input": torch.randn(6, generator=generator),
        # A transposed view: a fake built with empty_like from the input (or a slice of it) copies
        # the input's layout, which the real, contiguous output does not have.
        "a transposed (8, 4) float32 input": torch.randn(4, 8, generator=generator).t(),
    }


def check_pairwise_op(op: Any) -> str:
    """Exercise 1: ``op`` is ``pairwise_mean`` as a custom operator with a right fake kernel.

    On a (4, 16) float32, a (2, 3, 8) float64, a (6,) and a transposed (8, 4) input, the check
    compares the operator with the library function, compares its fake kernel's output (shape,
    dtype, device, strides) with the real one's, runs ``torch.library.opcheck``, checks the fake
    kernel keeps a "meta" input's device, and compiles ``op(x * 2) + 1`` with ``fullgraph=True``.
    It rejects a declaration that the operator writes its input.

    Example:
        >>> check_pairwise_op(None)
        'Exercise 1: not answered yet.'
    """
    if op is None:
        return "Exercise 1: not answered yet."
    overload = _custom_overload(1, op)
    if any(a.alias_info is not None and a.alias_info.is_write for a in overload._schema.arguments):
        raise AssertionError(
            "Exercise 1: the declaration says the operator writes its input, but pairwise_mean only reads "
            "it. Hint: mutates_args lists only what the function changes in place (a pessimistic "
            "declaration costs copies)"
        )
    # The task asks for any device: a kernel for CPU tensors alone fails at a GPU's first call.
    if not any(
        torch._C._dispatch_has_kernel_for_dispatch_key(overload.name(), key)
        for key in ("CompositeExplicitAutograd", "CUDA")
    ):
        raise AssertionError(
            "Exercise 1: the operator has a kernel for CPU tensors only, so a GPU tensor has nothing to run. "
            "Hint: look at what device_types does in custom_op"
        )
    for name, sample in _exercise_1_samples().items():
        try:
            real = op(sample)
        except Exception as error:  # noqa: BLE001
            raise AssertionError(
                f"Exercise 1: calling the operator on {name} raised {type(error).__name__}. Hint: its body "
                "should call the library's pairwise_mean"
            ) from None
        expected = pairwise_mean(sample)
        if isinstance(real, torch.Tensor) and real.shape == expected.shape and real.dtype != expected.dtype:
            raise AssertionError(
                f"Exercise 1: on {name} the operator returns another dtype than pairwise_mean. Hint: its "
                "body should pass the input to the library function unchanged and return its result"
            )
        if not (isinstance(real, torch.Tensor) and real.shape == expected.shape) or not (
            torch.allclose(real, expected)
        ):
            raise AssertionError(
                f"Exercise 1: on {name} the operator computes something else than pairwise_mean. Hint: "
                "its body should call the library function and return its result"
            )
        fake, error = _fake_outputs(op, (sample,))
        if error:
            missing = "no fake impl" in error.lower() or "register_fake" in error
            hint = (
                "register one with @your_op.register_fake"
                if missing
                else "a fake kernel gets tensors without data: build an empty output, never call NumPy"
            )
            what = "has no fake kernel" if missing else "its fake kernel raised"
            raise AssertionError(f"Exercise 1: on {name} the operator {what}. Hint: {hint}") from None
        for attribute in ("shape", "dtype", "device"):
            if getattr(fake, attribute, None) != getattr(real, attribute):
                raise AssertionError(
                    f"Exercise 1: on {name} the fake kernel's output has the wrong {attribute}. Hint: "
                    f"compute it from the input's {attribute}, for any number of dimensions"
                )
        # Compared here, not left to opcheck: its stride check was CUDA-only on 2.8 to 2.11 at least.
        if fake.stride() != real.stride():
            raise AssertionError(
                f"Exercise 1: on {name} the fake kernel's output is laid out otherwise than the real "
                "one (its strides differ), and compiled code relies on the layout. Hint: return a new, "
                "contiguous tensor, not a slice or a view of one"
            )
        results = torch.library.opcheck(op, (sample,), raise_exception=False)
        failed = sorted(test for test, result in results.items() if result != "SUCCESS")
        if failed:
            raise AssertionError(
                f"Exercise 1: on {name} torch.library.opcheck fails {', '.join(failed)}. Hint: run "
                "opcheck yourself and read its error"
            )
    # Every sample above is on the CPU, where a fake that forgets the device still looks right: a
    # "meta" input (no data, like a GPU's for this purpose) runs the fake kernel alone.
    meta = torch.empty(3, 8, device="meta")
    try:
        meta_out = op(meta)
    except Exception:  # noqa: BLE001 - reported below like a wrong device
        meta_out = None
    if getattr(meta_out, "device", None) != meta.device:
        raise AssertionError(
            "Exercise 1: on an input on another device (meta, standing in for a GPU) the fake kernel's "
            "output has the wrong device. Hint: compute it from the input's device, not the default one"
        )
    sample = _exercise_1_samples()["a (4, 16) float32 input"]
    error, counts = _fullgraph_error(lambda x: op(x * 2) + 1, sample)
    if error or counts.graphs != 1:
        raise AssertionError(
            f"Exercise 1: the operator passes opcheck, but fullgraph=True fails "
            f"({error or counts.summary()}). Hint: call the operator itself inside the compiled function"
        )
    return "Exercise 1: correct: opcheck passes, the fake kernel matches, one graph under fullgraph=True."


def check_lookup_into_op(op: Any) -> str:
    """Exercise 2: ``op`` is ``lookup_into`` as a custom operator that declares what it writes.

    The check reads the operator's schema (which arguments it declares written), runs it against
    the library function, runs ``torch.library.opcheck``, and compiles a function that calls it
    on an intermediate tensor with ``fullgraph=True``, comparing the result with eager.

    Example:
        >>> check_lookup_into_op(None)
        'Exercise 2: not answered yet.'
    """
    if op is None:
        return "Exercise 2: not answered yet."
    overload = _custom_overload(2, op)
    arguments = [argument.name for argument in overload._schema.arguments]
    if arguments[:2] != ["out", "x"]:
        raise AssertionError(
            f"Exercise 2: the operator takes {arguments}. Hint: keep lookup_into's arguments, (out, x)"
        )
    written = {
        a.name for a in overload._schema.arguments if a.alias_info is not None and a.alias_info.is_write
    }
    if "x" in written:
        raise AssertionError(
            "Exercise 2: the declaration says the operator writes an argument that it only reads. Hint: "
            "list only what the function changes in place (a pessimistic declaration costs copies)"
        )
    generator = torch.Generator().manual_seed(2)
    x = 4 * torch.randn(5, 7, generator=generator)
    out = torch.zeros(5, 7)
    expected = torch.zeros(5, 7)
    lookup_into(expected, x)
    try:
        returned = op(out, x)
    except Exception as error:  # noqa: BLE001
        lines = str(error).strip().splitlines()
        raise AssertionError(
            f"Exercise 2: calling the operator raised {type(error).__name__} ({lines[0] if lines else ''}). "
            "Hint: a custom operator may not return one of its inputs; like lookup_into, return None"
        ) from None
    if returned is not None or not torch.allclose(out, expected):
        raise AssertionError(
            "Exercise 2: the operator does not do what lookup_into does (write into out, return nothing). "
            "Hint: call lookup_into(out, x) and return None"
        )
    results = torch.library.opcheck(op, (torch.zeros(3, 4), torch.randn(3, 4)), raise_exception=False)
    if results.get("test_schema") != "SUCCESS":
        raise AssertionError(
            "Exercise 2: opcheck's test_schema fails: the operator changes an argument that its "
            "declaration does not list. Hint: mutates_args names what the function writes"
        )
    failed = sorted(test for test, result in results.items() if result != "SUCCESS")
    if failed:
        raise AssertionError(
            f"Exercise 2: opcheck fails {', '.join(failed)}. Hint: run opcheck yourself and read its "
            "error; a fake kernel, if you wrote one, describes what the operator returns: nothing"
        )

    def uses_it(t: torch.Tensor) -> torch.Tensor:
        buffer = torch.empty_like(t)
        op(buffer, t * 2)
        return buffer + 1

    error, counts = _fullgraph_error(uses_it, x)
    if error or counts.graphs != 1:
        raise AssertionError(
            f"Exercise 2: opcheck passes, but fullgraph=True fails ({error or counts.summary()}). Hint: "
            "a fake kernel, if you wrote one, returns None like the operator"
        )
    torch._dynamo.reset()
    try:
        compiled = torch.compile(uses_it, backend="aot_eager", fullgraph=True)(x)
    finally:
        torch._dynamo.reset()
    if not torch.allclose(compiled, uses_it(x)):
        raise AssertionError(
            "Exercise 2: compiled, the function that calls the operator gives another result than eager. "
            "Hint: check mutates_args"
        )
    return "Exercise 2: correct: the declaration matches what it writes, opcheck passes, one graph."
