"""Self-checks for notebook 06 (regional compilation): each compiles what the learner wrote.

The checks use ``backend="aot_eager"`` (or a backend that records the graph and runs it as it
is): they count what Dynamo does, which needs no C++ compiler, and take a second or two.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from helpers.counters import CompileCounts
from helpers.exercises import check_answer, wrong_answer

__all__ = [
    "DepthScaledBlock",
    "Mixer",
    "Norm",
    "alternating_stack",
    "check_fixed_block",
    "check_mark_region",
    "check_regional_frames",
]

#: Compiled against eager on these tiny float32 blocks (aot_eager generates no code: ATen's kernels run).
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
WIDTH = 16
N_BLOCKS = 6


class Mixer(nn.Module):
    """A residual block: ``x + relu(linear(x))``."""

    def __init__(self, width: int = WIDTH) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.linear(x))


class Norm(nn.Module):
    """A layer norm as a block of its own."""

    def __init__(self, width: int = WIDTH) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class DepthScaledBlock(nn.Module):
    """A residual block damped by its depth: block ``i`` multiplies its branch by ``1 / (i + 1)``."""

    def __init__(self, layer_idx: int, width: int = WIDTH) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.layer_idx = layer_idx  # a Python int: a constant of the compiled code

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.linear(x)) / (self.layer_idx + 1)


def alternating_stack(n_blocks: int = N_BLOCKS) -> nn.Sequential:
    """``Mixer, Norm, Mixer, ...``: ``n_blocks`` blocks of two classes, with seeded weights.

    Example:
        >>> [type(block).__name__ for block in alternating_stack(4)]
        ['Mixer', 'Norm', 'Mixer', 'Norm']
    """
    if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or n_blocks < 1:
        raise ValueError(f"n_blocks must be a positive int; got {n_blocks!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(*[Mixer() if i % 2 == 0 else Norm() for i in range(n_blocks)])


def _regional_frames(
    stack: nn.Sequential, x: torch.Tensor, *, grad: bool = False
) -> tuple[torch.Tensor, CompileCounts]:
    """After a reset, compile each block of ``stack`` with aot_eager and run it once, under
    ``torch.no_grad()`` unless ``grad``; return its output and counts."""
    torch._dynamo.reset()
    for block in stack:
        block.compile(backend="aot_eager")
    with CompileCounts() as counts, torch.set_grad_enabled(grad):
        out = stack(x)
    torch._dynamo.reset()
    return out, counts


def check_regional_frames(frames_read: int | None) -> str:
    """Exercise 1: the frames Dynamo compiles for ``alternating_stack()`` compiled block by block.

    The check counts the way the exercise says: after ``torch._dynamo.reset()`` it compiles each
    block with ``block.compile(backend="aot_eager")`` and runs the stack once under
    ``torch.no_grad()`` inside ``CompileCounts()``. A wrong number is told what it is (nothing
    counted, the count with gradients on, one per block) or only that it is wrong: never higher or
    lower, so the answer cannot be found by trying numbers.

    Example:
        >>> check_regional_frames(None)
        'Exercise 1: not answered yet.'
    """
    if frames_read is not None and (not isinstance(frames_read, int) or isinstance(frames_read, bool)):
        raise TypeError(
            f"frames_read must be an int (the frames you counted); got {type(frames_read).__name__}"
        )
    if frames_read is None:
        return check_answer(1, None, None, hint="unused")
    hint = (
        "compiled code is shared by every block that runs the same forward with the same kinds of "
        "inputs; reset Dynamo, compile each block, and count one run under torch.no_grad() with "
        "CompileCounts"
    )
    stack = alternating_stack()
    _, counts = _regional_frames(stack, torch.randn(2, WIDTH))
    if frames_read == counts.frames:
        return check_answer(1, frames_read, counts.frames, hint=hint)
    if frames_read == 0:
        raise wrong_answer(
            1,
            "0 frames means nothing was compiled inside your CompileCounts(): the blocks had been "
            "compiled by an earlier run of the cell, and Dynamo reused that code",
            "call torch._dynamo.reset() before compiling the blocks, then count again",
        )
    _, with_grad = _regional_frames(alternating_stack(), torch.randn(2, WIDTH), grad=True)
    if frames_read == with_grad.frames:
        raise wrong_answer(
            1,
            f"{frames_read} is the count with gradients on, where a block first compiled for an input "
            "that does not require grad is compiled again for one that does (CompileCounts shows it "
            "as a recompilation)",
            "run the stack under torch.no_grad(), as the exercise says",
        )
    if frames_read == len(stack):
        raise wrong_answer(1, f"{frames_read} counts the blocks, not the frames Dynamo compiled", hint)
    raise wrong_answer(1, f"{frames_read} is not the number of frames Dynamo compiles for this stack", hint)


def _depth_scaled_stack(block_class: type) -> nn.Sequential:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(*[block_class(layer_idx=i) for i in range(N_BLOCKS)])


def check_fixed_block(block_class: type[nn.Module] | None) -> str:
    """Exercise 2: ``block_class`` computes what ``DepthScaledBlock`` does and compiles once.

    Six blocks ``block_class(layer_idx=i)`` (seeded like six ``DepthScaledBlock``) are compiled
    one by one with ``aot_eager``. Their output must match the ``DepthScaledBlock`` stack's
    within rtol=atol=1e-5, and Dynamo must compile one frame for all six.

    Example:
        >>> check_fixed_block(None)
        'Exercise 2: not answered yet.'
    """
    if block_class is None:
        return check_answer(2, None, None, hint="unused")
    if not (isinstance(block_class, type) and issubclass(block_class, nn.Module)):
        raise TypeError(
            f"block_class must be an nn.Module subclass (a class, not an instance); got {block_class!r}"
        )
    x = torch.randn(2, WIDTH)
    reference, _ = _regional_frames(_depth_scaled_stack(DepthScaledBlock), x)
    out, counts = _regional_frames(_depth_scaled_stack(block_class), x)
    torch.testing.assert_close(
        out,
        reference,
        **TOLERANCE,
        msg=lambda report: (
            "Exercise 2: the six blocks must compute what DepthScaledBlock's do (create "
            "the nn.Linear first, as it does, so that the seed gives both the same weights).\n" + report
        ),
    )
    hint = (
        "a Python number on a module is a constant of the compiled code, a tensor (a buffer) is an "
        "input of the graph"
    )
    if counts.frames != 1:
        reason = counts.recompile_reasons[0] if counts.recompile_reasons else "none given"
        raise wrong_answer(
            2,
            f"your six blocks compute the right numbers, but Dynamo compiled them {counts.frames} times, "
            f"not once: something that differs between blocks is still guarded (the first recompile "
            f"reason: {reason})",
            hint,
        )
    return check_answer(2, counts.frames, 1, hint=hint)


def _invoke_subgraph_calls(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [node for node in graph.nodes if node.target is torch.ops.higher_order.invoke_subgraph]


def _ops_outside_regions(graph: torch.fx.Graph) -> list[str]:
    """Operations of the outer graph other than a region call and reading its outputs."""
    return [
        getattr(node.target, "__name__", str(node.target))
        for node in graph.nodes
        if node.op in ("call_function", "call_method", "call_module")
        and node.target not in (torch.ops.higher_order.invoke_subgraph, operator.getitem)
    ]


def check_mark_region(mark: Callable[[nn.Sequential], Any] | None) -> str:
    """Exercise 3: ``mark(stack)`` marks six ``Mixer`` blocks so a whole-stack compile reuses one region.

    The check builds six ``Mixer`` blocks with different weights, calls ``mark(stack)``, compiles
    the whole stack with a backend that records Dynamo's graph, and requires:

    - ``mark`` leaves the classes alone: a class's ``forward`` replaced (``Mixer.forward = ...``)
      changes every block of that class in the session, so the check puts it back and says so;
    - no module carries a ``forward`` of its own (an instance attribute, e.g. bound with
      ``types.MethodType``): where a release reuses the region's first trace, such blocks all
      compute with block 0's weights, silently; and marking a bound method (``block.forward``,
      ``block.linear.forward``) fails inside torch 2.13 and 2.15 (not 2.8), which the check explains;
    - the compiled stack matches the eager one, each block with its own weights (rtol=atol=1e-5);
    - the graph calls ``invoke_subgraph`` six times, always the same subgraph, and does nothing
      else: the region is each block's whole ``forward`` (marking only its ``nn.Linear`` leaves
      the ReLU and the residual add traced once per block, outside the region).

    Example:
        >>> check_mark_region(None)
        'Exercise 3: not answered yet.'
    """
    if mark is None:
        return check_answer(3, None, None, hint="unused")
    if not callable(mark):
        raise TypeError(f"mark must be a function that changes a stack's blocks in place; got {mark!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        stack = nn.Sequential(*[Mixer() for _ in range(N_BLOCKS)])
        x = torch.randn(2, WIDTH)
    with torch.no_grad():
        expected = stack(x)
    classes = {cls for module in stack.modules() for cls in type(module).__mro__ if cls is not object}
    forwards = {cls: vars(cls).get("forward") for cls in classes}
    region_hint = (
        "mark the forward of a class (a subclass of Mixer, as section 2 does for GPT2Block) and switch "
        "the blocks' __class__ to it"
    )
    try:
        mark(stack)
    except AttributeError as error:
        if "__marked_compile_region_config__" not in str(error):
            raise
        raise wrong_answer(
            3,
            "nested_compile_region was given a bound method (such as block.forward or "
            "block.linear.forward): it marks a plain function, and torch could not mark the method "
            f"({error})",
            region_hint,
        ) from None
    patched = sorted(
        cls.__name__ for cls, forward in forwards.items() if vars(cls).get("forward") is not forward
    )
    for cls, forward in forwards.items():  # put every class back as it was, for the rest of the session
        if vars(cls).get("forward") is not forward:
            if forward is None:
                delattr(cls, "forward")
            else:
                cls.forward = forward
    if patched:
        raise wrong_answer(
            3,
            f"your function changed the forward of the class {', '.join(patched)} itself, which "
            "changes every such module in the session, not only this stack's blocks (the check has "
            "put it back)",
            "change only the blocks of `stack`: " + region_hint,
        )
    own_forward = [
        "stack" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in name.split(".") if part)
        for name, module in stack.named_modules()
        if "forward" in vars(module)
    ]
    if own_forward:
        raise wrong_answer(
            3,
            f"{', '.join(own_forward)} carry a forward of their own (an instance attribute, set by "
            "`module.forward = ...` or types.MethodType); where a release traces a region once and "
            "reuses it, every block then computes with block 0's weights",
            region_hint,
        )
    graphs: list[torch.fx.GraphModule] = []

    def recording_backend(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            out = torch.compile(stack, backend=recording_backend)(x)
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(
        out,
        expected,
        **TOLERANCE,
        msg=lambda report: (
            "Exercise 3: the compiled stack must compute what the eager one does, each "
            "block with its own weights.\n" + report
        ),
    )
    calls = [call for graph_module in graphs for call in _invoke_subgraph_calls(graph_module.graph)]
    bodies = {call.args[0].target for call in calls}
    outside = sorted({op for graph_module in graphs for op in _ops_outside_regions(graph_module.graph)})
    hint = (
        "wrap the whole forward of one block class with torch.compiler.nested_compile_region and give "
        "every block that class (section 2 did it for GPT2Block)"
    )
    if len(graphs) != 1:
        raise wrong_answer(
            3, f"Dynamo compiled {len(graphs)} graphs for the stack, not one (a graph break?)", hint
        )
    if len(calls) != N_BLOCKS:
        raise wrong_answer(
            3,
            f"the graph calls a region {len(calls)} times for {N_BLOCKS} blocks: every block must "
            f"enter a marked forward (operations outside any region: {outside})",
            hint,
        )
    if len(bodies) != 1:
        raise wrong_answer(
            3, f"the graph calls {len(bodies)} different subgraphs: the blocks do not share one region", hint
        )
    if outside:
        raise wrong_answer(
            3,
            f"the graph still runs {outside} outside the region, once per block: the region is only part "
            "of a block's forward",
            hint,
        )
    return check_answer(3, len(calls), N_BLOCKS, hint=hint)
