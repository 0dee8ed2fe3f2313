"""Self-checks for notebook 13's exercises: a checkpoint key fixer and a module that exports.

Both checks compile with ``backend="aot_eager"`` (Dynamo and AOTAutograd, no C++ compiler needed)
and say what is wrong without giving the answer away.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import io
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import torch
from packaging.version import Version
from torch import nn

from helpers.guard import torch_version
from helpers.logs import captured_log

#: The loggers that report a data-dependent expression while exporting; their text goes nowhere.
_EXPORT_LOGGERS = ("torch.fx.experimental.symbolic_shapes", "torch._export.non_strict_utils")

#: Torch 2.8's Dynamo breaks at ``.item()`` unless ``capture_scalar_outputs`` is set, even under
#: ``fullgraph=True``; 2.13 and 2.15 keep it in the graph when ``fullgraph=True`` (``method_item`` in
#: torch/_dynamo/variables/tensor.py). The releases between were not checked: they get the flag too.
_NEEDS_CAPTURE_SCALAR_OUTPUTS = torch_version() < Version("2.13")


class Blocks(nn.Module):
    """Exercise 1's model: two blocks in a ``ModuleList`` and a head, like a small transformer.

    Example:
        >>> sorted(Blocks().state_dict())[:2]
        ['blocks.0.bias', 'blocks.0.weight']
    """

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(2))
        self.head = nn.Linear(width, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.head(x)


def _checkpoints(seed: int = 1) -> dict[str, dict[str, torch.Tensor]]:
    """The same weights saved from a whole-model wrapper, a regionally compiled model and an eager one."""
    torch.manual_seed(seed)
    eager = Blocks()
    regional = copy.deepcopy(eager)
    for index, block in enumerate(regional.blocks):  # each repeated block replaced by its wrapper
        regional.blocks[index] = torch.compile(block, backend="aot_eager")
    return {
        "a whole-model torch.compile wrapper": torch.compile(
            copy.deepcopy(eager), backend="aot_eager"
        ).state_dict(),
        "a regionally compiled model (each block wrapped)": regional.state_dict(),
        "an eager model": eager.state_dict(),
    }


def check_clean_state_dict(clean: Callable[[dict[str, torch.Tensor]], Any] | None) -> str:
    """Exercise 1: ``clean(state_dict)`` returns a state dict an eager ``Blocks`` loads, strictly.

    The check feeds it three checkpoints of the same weights: saved from ``torch.compile(model)``,
    from a model whose blocks were each replaced by ``torch.compile(block)``, and from an eager model. Each
    result must load into a fresh eager ``Blocks`` with ``strict=True`` and give it those weights.

    Example:
        >>> check_clean_state_dict(None)
        'Exercise 1: not answered yet.'
    """
    if clean is None:
        return "Exercise 1: not answered yet."
    if not callable(clean):
        raise TypeError(
            f"Exercise 1: my_clean_state_dict must be a function of a state dict; got {type(clean).__name__}"
        )
    for name, checkpoint in _checkpoints().items():
        # The expected values, kept apart: an answer that changes the tensors in place is caught.
        saved = {key.replace("_orig_mod.", ""): value.clone() for key, value in checkpoint.items()}
        cleaned = clean(dict(checkpoint))
        if not isinstance(cleaned, Mapping):
            raise AssertionError(
                f"Exercise 1: for a checkpoint from {name}, your function returned "
                f"{type(cleaned).__name__}, not a state dict. Hint: return the new dict (some helpers "
                "change theirs in place and return None)"
            )
        fresh = Blocks()
        try:
            fresh.load_state_dict(cleaned, strict=True)
        except RuntimeError as error:
            first = str(error).splitlines()[1].strip() if len(str(error).splitlines()) > 1 else str(error)
            raise AssertionError(
                f"Exercise 1: the checkpoint from {name} does not load strictly after your function: "
                f"{first}. Hint: print its keys before and after; where can the wrapper's prefix sit?"
            ) from None
        for key, loaded in fresh.state_dict().items():
            if not torch.equal(loaded, saved[key]):
                raise AssertionError(
                    f"Exercise 1: after loading the checkpoint from {name}, {key} holds other values "
                    "than the checkpoint's. Hint: keep each tensor with its own name"
                )
    return "Exercise 1: correct: all three checkpoints load strictly into an eager model."


class Truncate(nn.Module):
    """Exercise 2's module: cuts a padded batch to its longest sequence, and refuses bad lengths.

    Example:
        >>> Truncate()(torch.zeros(2, 5, 3), torch.tensor([2, 4])).shape
        torch.Size([2, 4, 3])
    """

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        longest = lengths.max().item()
        if longest < 1 or longest > x.shape[1]:
            raise ValueError(f"lengths must lie in 1..{x.shape[1]}; the longest is {longest}")
        return x[:, :longest]


def _same_as_truncate(
    name: str, module: Callable[..., Any], x: torch.Tensor, samples: list[torch.Tensor]
) -> None:
    for lengths in samples:
        expected = Truncate()(x, lengths)
        try:
            got = module(x, lengths)
        except Exception as error:  # noqa: BLE001 - a refusal of valid lengths is the finding
            raise AssertionError(
                f"Exercise 2: {name} raises {type(error).__name__} for lengths {lengths.tolist()}, which "
                "Truncate accepts. Hint: only the longest length must lie in range"
            ) from None
        if got.shape != expected.shape or not torch.equal(got, expected):
            raise AssertionError(
                f"Exercise 2: {name} returns a {tuple(got.shape)} tensor where Truncate returns "
                f"{tuple(expected.shape)} (lengths {lengths.tolist()}). Hint: the cut follows the lengths"
            )


def _python_question_in_a_check(module: nn.Module) -> str | None:
    """What in a ``torch._check(...)`` of ``module.forward`` makes Python itself answer a question.

    A chained comparison ``a <= b <= c`` is Python's ``a <= b and b <= c``, and ``and``/``or`` ask
    Python whether their first operand is true: on a value read from a tensor, that is the same
    question as an ``if``, asked before ``torch._check`` sees anything.

    Example:
        >>> class Chained(nn.Module):
        ...     def forward(self, x, n):
        ...         torch._check(0 < n <= x.shape[0])
        >>> _python_question_in_a_check(Chained())
        'a chained comparison'
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(type(module).forward)))
    except (OSError, TypeError, SyntaxError):  # no source to read (defined in a REPL, say)
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name != "_check":
            continue
        condition = node.args[0]
        if isinstance(condition, ast.Compare) and len(condition.ops) > 1:
            return "a chained comparison"
        if isinstance(condition, ast.BoolOp):
            return "`and`" if isinstance(condition.op, ast.And) else "`or`"
    return None


def _raises(call: Callable[[], Any]) -> bool:
    try:
        call()
    except (RuntimeError, ValueError, AssertionError):
        return True
    return False


def check_truncate(module: nn.Module | None) -> str:
    """Exercise 2: ``module`` does what ``Truncate`` does, and compiles and exports as one graph.

    The check exports it with ``torch.export.export`` and compiles it with ``fullgraph=True``
    (with ``capture_scalar_outputs=True`` before torch 2.13, which needs it), compares both with
    ``Truncate`` on batches whose longest length differs from the traced one, and requires that a
    longest length of 0 or longer than the batch still raises, eagerly, compiled and exported.

    Example:
        >>> check_truncate(None)
        'Exercise 2: not answered yet.'
    """
    if module is None:
        return "Exercise 2: not answered yet."
    if isinstance(module, type):
        module = module()
    if not isinstance(module, nn.Module):
        raise TypeError(
            f"Exercise 2: MyTruncate must be an nn.Module class (or an instance); got {type(module).__name__}"
        )
    torch.manual_seed(0)
    x = torch.randn(3, 10, 4)
    # an empty sequence is valid as long as one is not: only the longest length is bounded
    samples = [torch.tensor(lengths) for lengths in ([2, 6, 4], [10, 1, 3], [1, 1, 1], [0, 3, 2])]
    # Another batch width: a bound typed in as a number instead of read from x fails there.
    narrow = torch.randn(2, 5, 3)
    valid = [(x, samples), (narrow, [torch.tensor([2, 5])])]
    bad = {
        "a longest length of 0": (x, torch.tensor([0, 0, 0])),
        "a length past the batch": (x, torch.tensor([3, 11, 2])),
        "a negative longest length": (x, torch.tensor([-1, -2, -3])),
        "a length past a narrower batch": (narrow, torch.tensor([2, 7])),
    }
    for batch, lengths in valid:
        _same_as_truncate("your module", module, batch, lengths)
    for name, (batch, lengths) in bad.items():
        if not _raises(lambda batch=batch, lengths=lengths: module(batch, lengths)):
            raise AssertionError(
                f"Exercise 2: {name} no longer raises, even eagerly. Hint: keep the validation"
            )
    # A failed export also prints the partial graph to stderr: the message below says what matters.
    with captured_log(*_EXPORT_LOGGERS), contextlib.redirect_stderr(io.StringIO()):
        try:
            exported = torch.export.export(module, (x, samples[0])).module()
        except Exception as error:  # noqa: BLE001 - any export failure is the learner's to read
            question = _python_question_in_a_check(module)
            if question == "a chained comparison":
                hint = (
                    "a torch._check holds a chained comparison: Python runs `a <= b <= c` as "
                    "`a <= b and b <= c`, and `and` asks Python whether `a <= b` is true, a question "
                    "about a value read from a tensor, like an `if`"
                )
            elif question:
                hint = (
                    f"a torch._check holds {question}, which asks Python whether its first part is "
                    "true: a question about a value read from a tensor, like an `if`"
                )
            else:
                hint = (
                    "which line asks a Python question about a value read from a tensor (an `if`; "
                    "an `and`, `or` or chained comparison `a <= b <= c` asks one too)?"
                )
            raise AssertionError(
                f"Exercise 2: torch.export.export failed: {type(error).__name__}: "
                f"{str(error).splitlines()[0]}. Hint: {hint}"
            ) from None
    torch._dynamo.reset()
    scalar_outputs = {"capture_scalar_outputs": True} if _NEEDS_CAPTURE_SCALAR_OUTPUTS else {}
    with torch._dynamo.config.patch(**scalar_outputs), captured_log(*_EXPORT_LOGGERS):
        compiled = torch.compile(module, backend="aot_eager", fullgraph=True)
        try:
            compiled(x, samples[0])
        except Exception as error:  # noqa: BLE001
            raise AssertionError(
                f"Exercise 2: fullgraph=True raised {type(error).__name__}: {str(error).splitlines()[0]}. "
                "Hint: torch.export traced it, so look at what fullgraph=True also traces (a message "
                "function given to torch._check, for one)"
            ) from None
        # The exported program is specialised to x's shape; the compiled module takes any width.
        for runner_name, runner, widths in (("exported", exported, [x]), ("compiled", compiled, [x, narrow])):
            for batch, lengths in valid:
                if any(batch is width for width in widths):
                    _same_as_truncate(f"the {runner_name} module", runner, batch, lengths)
            for name, (batch, lengths) in bad.items():
                if any(batch is width for width in widths) and not _raises(
                    lambda runner=runner, batch=batch, lengths=lengths: runner(batch, lengths)
                ):
                    raise AssertionError(
                        f"Exercise 2: the {runner_name} module accepts {name}, which Truncate refuses. "
                        "Hint: a check the compiler keeps runs at every call"
                    )
    torch._dynamo.reset()
    return "Exercise 2: correct: one graph, exported and compiled, and bad lengths still raise."
