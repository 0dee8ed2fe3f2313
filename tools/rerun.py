"""Run All twice in one kernel, the second time with every code cell run twice in a row.

A learner rarely restarts the kernel: they re-run a cell, or press Run All again after an edit.
``python tools/run_notebooks.py --rerun`` (``make test-rerun``) executes each notebook as

    pass 1: every cell, top to bottom (what nbval runs)
    pass 2: every code cell twice in a row, top to bottom

so pass 2 starts from everything pass 1 left in the process (configs, registrations, caches, thread
counts), and each cell meets its own leftovers. An assert that fails in pass 2 is a fact that depends
on what ran before. A cell whose printed facts differ between its two runs in a row is reported
too: its counts depend on its own earlier run (it does not reset what it counts). Compared are the
outputs strict nbval compares, with measured figures masked (see ``mask``); a cell that
legitimately moves on when re-run (a training step) says why in a ``# re-run:`` comment.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
import uuid
from pathlib import Path

import nbformat

PASS_2_TAG = "rerun-pass-2"
#: A comment that says why a re-run of this cell prints something else (it is not compared).
MOVES_ON = "# re-run:"
IGNORE_OUTPUT = "# NBVAL_IGNORE_OUTPUT"
#: nbval's tag for a cell it runs without comparing its output.
IGNORE_OUTPUT_TAG = "nbval-ignore-output"

# What may differ between two runs of the same cell without meaning a different fact: measured
# figures (decimals, a number with a unit of time, rate, size or ratio), addresses, scratch paths.
_MASKS = [
    re.compile(r"0x[0-9a-f]+", re.I),
    re.compile(r"/tmp/\S+|/var/folders/\S+"),
    re.compile(
        r"\d+(\.\d+)?(e[-+]?\d+)?\s*(ms|µs|us|ns|s|min|x|×|%|[KMG]i?B(/s)?|tokens/s|calls|it/s)(?!\w)", re.I
    ),
    re.compile(r"\d+\.\d+(e[-+]?\d+)?", re.I),
]


@functools.cache
def _sanitizers() -> list[tuple[re.Pattern, str]]:
    """The replacements strict nbval makes before comparing (tests/sanitize.cfg)."""
    config = Path(__file__).resolve().parent.parent / "tests" / "sanitize.cfg"
    lines = [line.strip() for line in config.read_text(encoding="utf-8").splitlines()]
    regexes = [line.split(":", 1)[1].strip() for line in lines if line.startswith("regex:")]
    replaces = [line.split(":", 1)[1].strip() for line in lines if line.startswith("replace:")]
    return [(re.compile(regex), replace) for regex, replace in zip(regexes, replaces, strict=True)]


def mask(text: str) -> str:
    """Replace measured figures by ``#`` (after nbval's own sanitizing) so that only facts remain.

    >>> mask("3 graphs, 1.48x, speed-up 48 %, in /tmp/course-x1")
    '3 graphs, #, speed-up #, in <TMP>'
    """
    for pattern, replace in _sanitizers():
        text = pattern.sub(replace, text)
    for pattern in _MASKS:
        text = pattern.sub("#", text)
    return text


def doubled(notebook: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, list[tuple[int, int]]]:
    """The notebook to execute, and for each of its cells (pass, index of the original cell)."""
    cells, origin = list(notebook.cells), [(1, index) for index in range(len(notebook.cells))]
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        for _ in range(2):
            again = copy.deepcopy(cell)
            again["id"] = uuid.uuid4().hex[:12]
            again.outputs, again.execution_count = [], None
            again.metadata.setdefault("tags", []).append(PASS_2_TAG)
            cells.append(again)
            origin.append((2, index))
    result = copy.deepcopy(notebook)
    result.cells = cells
    return result, origin


def _printed(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            parts.append("".join(out.get("text", "")))
        elif out.get("output_type") in {"execute_result", "display_data"}:
            parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def differing_counts(executed: nbformat.NotebookNode, origin: list[tuple[int, int]]) -> list[str]:
    """One line per cell whose two runs in a row (pass 2) printed different facts."""
    report, pairs = [], {}
    for cell, (pass_, index) in zip(executed.cells, origin, strict=True):
        compared = not (
            cell.source.startswith(IGNORE_OUTPUT)
            or IGNORE_OUTPUT_TAG in cell.metadata.get("tags", [])
            or MOVES_ON in cell.source
        )
        if pass_ == 2 and compared:
            pairs.setdefault(index, []).append(mask(_printed(cell)))
    for index, (first, second) in sorted(pairs.items()):
        if first != second:
            changed = [
                line
                for line in difflib.unified_diff(first.splitlines(), second.splitlines(), lineterm="", n=0)
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            ]
            report.append(f"cell {index}: " + " | ".join(changed[:4])[:300])
    return report


def failed_cells(executed: nbformat.NotebookNode, origin: list[tuple[int, int]]) -> list[str]:
    """One line per executed cell that raised: where, and the error (the run goes on past errors)."""
    report = []
    for executed_index, cell in enumerate(executed.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                error = f"{out.get('ename')}: {out.get('evalue', '')[:120]}"
                report.append(f"{where(origin, executed_index)}: {error}")
    return report


def where(origin: list[tuple[int, int]], executed_index: int) -> str:
    """Name an executed cell by its pass and its index in the notebook as committed."""
    pass_, index = origin[executed_index]
    again = pass_ == 2 and executed_index > 0 and origin[executed_index - 1] == (2, index)
    return f"pass {pass_}, cell {index}" + (" (its second run in a row)" if again else "")
