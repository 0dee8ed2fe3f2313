"""Self-checks of notebook 10's exercises: a third planted bug, and one figure read off a trace report.

Exercise 1's bug is :func:`noisy_layer` (a noise-augmentation layer). What the ladder and the
bisector say about it is at the end of this file (the exercise's answer: read the layer first).
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from helpers.debugging import report_file
from helpers.exercises import check_answer

#: The ladder of backends, each adding one stage of the compiler to the one before.
LADDER = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")


def noisy_layer(x: torch.Tensor) -> torch.Tensor:
    """Exercise 1's model: a layer that adds Gaussian noise (as in noise augmentation), then a norm.

    Example:
        >>> _ = torch.manual_seed(0); a = noisy_layer(torch.ones(2, 4))
        >>> _ = torch.manual_seed(0); b = noisy_layer(torch.ones(2, 4))
        >>> torch.equal(a, b)
        True
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"x must be a tensor with at least one dimension; got {type(x).__name__}")
    noisy = x + 0.1 * torch.randn_like(x)
    return torch.nn.functional.layer_norm(noisy, noisy.shape[-1:])


def check_third_bug(answer: dict[str, Any]) -> str:
    """Exercise 1: the first backend of the ladder that differs, and the subsystem the bisector names.

    ``answer`` maps ``"first_backend"`` (one of :data:`LADDER`) and ``"subsystem"`` (the
    ``subsystem`` field of ``do_bisect``'s result) to the learner's findings; ``None`` while unanswered.

    Example:
        >>> check_third_bug({"first_backend": None, "subsystem": None})
        'Exercise 1: not answered yet.'
        >>> check_third_bug({"first_backend": "inductor", "subsystem": None})
        'Exercise 1: first_backend right so far; subsystem not answered yet.'
        >>> check_third_bug({"first_backend": "inductor", "subsystem": "inductor_fallback_random"})
        'Exercise 1: correct.'
    """
    if not isinstance(answer, dict) or set(answer) != set(THIRD_BUG):
        raise ValueError(f"answer must be a dict with the keys {sorted(THIRD_BUG)}; got {answer!r}")
    backend = answer["first_backend"]
    if backend is not None and backend not in LADDER:
        raise ValueError(f"answer['first_backend'] must be one of {LADDER} or None; got {backend!r}")
    hints = {
        "first_backend": "run the ladder with one seed before every call: which rung first gives other "
        "numbers",
        "subsystem": "read do_bisect's result: is a decomposition at fault, or a setting of Inductor",
    }
    # The parts in order, so that a first part alone is confirmed before the second is filled in.
    right = []
    for part in THIRD_BUG:
        if answer[part] is None:
            continue
        check_answer(1, {part: answer[part]}, {part: THIRD_BUG[part]}, hint=hints[part])
        right.append(part)
    if not right:
        return "Exercise 1: not answered yet."
    if len(right) < len(THIRD_BUG):
        missing = [part for part in THIRD_BUG if part not in right]
        return f"Exercise 1: {', '.join(right)} right so far; {', '.join(missing)} not answered yet."
    return "Exercise 1: correct."


def trace_graph_ops(report_dir: str | os.PathLike[str]) -> int:
    """The ``graph_op_count`` of the first frame a tlparse report lists (from its ``raw.jsonl``).

    Example:
        >>> trace_graph_ops("/no/such/report")
        Traceback (most recent call last):
        ...
        ValueError: report_dir must be a tlparse output folder with raw.jsonl; got '/no/such/report'
    """
    path = report_file(report_dir, "raw.jsonl")
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line).get("compilation_metrics") if line.strip() else None
        if record and record.get("co_name") and record.get("graph_op_count") is not None:
            return int(record["graph_op_count"])
    raise ValueError(f"{path} holds no compilation_metrics record with a graph_op_count")


def check_graph_ops(answer: int | None, report_dir: str | os.PathLike[str] | None) -> str:
    """Exercise 2: the operations in the graph Dynamo captured, read off the trace report.

    The right value is computed from the report itself (``report_dir``; ``None`` where the
    trace cell was skipped). The count is of operations: not placeholders (inputs) or the output.

    Example:
        >>> check_graph_ops(None, None)
        'Exercise 2: not answered yet.'
    """
    if answer is None:
        return "Exercise 2: not answered yet."
    if not isinstance(answer, int) or isinstance(answer, bool) or answer < 0:
        raise ValueError(f"answer must be a count (an int >= 0); got {answer!r}")
    if report_dir is None:
        return "Exercise 2: no trace report here (the trace cell was skipped), so nothing to check against."
    return check_answer(
        2,
        answer,
        trace_graph_ops(report_dir),
        hint=(
            "open the frame's compilation metrics page in the report and read its Graph Ops line: "
            "it counts operations, not the graph's inputs (placeholders) and output"
        ),
    )


#: Exercise 1's answer. Checked on torch 2.8, 2.13 and 2.15 on a CPU: ``eager``, ``aot_eager`` and
#: ``aot_eager_decomp_partition`` reproduce eager's numbers exactly under one seed (the decomposed
#: ``randn_like`` draws the same numbers from the same seed), ``inductor`` does not (it draws its own
#: random numbers in the generated kernel), and ``CompilerBisector.do_bisect`` names the subsystem.
THIRD_BUG = {"first_backend": "inductor", "subsystem": "inductor_fallback_random"}
