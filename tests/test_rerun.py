"""`make test-rerun`'s pieces (tools/rerun.py): what it executes, and what it calls a changed count."""

from __future__ import annotations

import doctest

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import rerun


def test_the_doctests_hold():
    assert doctest.testmod(rerun).failed == 0


def _notebook() -> nbformat.NotebookNode:
    return new_notebook(
        cells=[new_markdown_cell("# title"), new_code_cell("a = 1"), new_code_cell("print(a)")]
    )


def test_pass_two_runs_every_code_cell_twice_in_a_row_after_pass_one():
    doubled, origin = rerun.doubled(_notebook())
    assert origin == [(1, 0), (1, 1), (1, 2), (2, 1), (2, 1), (2, 2), (2, 2)]
    assert [cell.source for cell in doubled.cells[3:]] == ["a = 1", "a = 1", "print(a)", "print(a)"]
    copies = doubled.cells[3:]
    assert len({cell["id"] for cell in copies}) == len(copies)  # nbformat wants each id once
    assert rerun.where(origin, 5) == "pass 2, cell 2"
    assert rerun.where(origin, 6) == "pass 2, cell 2 (its second run in a row)"


def _executed(first: str, second: str) -> tuple[nbformat.NotebookNode, list]:
    doubled, origin = rerun.doubled(new_notebook(cells=[new_code_cell("print(counts)")]))
    doubled.cells[1].outputs = [new_output("stream", name="stdout", text=first)]
    doubled.cells[2].outputs = [new_output("stream", name="stdout", text=second)]
    return doubled, origin


def test_a_count_that_changes_on_the_rerun_is_reported():
    report = rerun.differing_counts(
        *_executed("graphs: 2, recompilations: 1\n", "graphs: 1, recompilations: 0\n")
    )
    assert len(report) == 1 and report[0].startswith("cell 0:") and "graphs: 1" in report[0]


def test_timings_and_addresses_may_change_on_the_rerun():
    first = "graphs: 2 | first call 12.5 s, then 3 ms (1.48x) at 0x7f00aa\n"
    second = "graphs: 2 | first call 0.8 s, then 4 ms (1.02x) at 0x7f00bb\n"
    assert rerun.differing_counts(*_executed(first, second)) == []


def test_a_cell_that_says_why_it_moves_on_is_not_compared():
    for source in ("# NBVAL_IGNORE_OUTPUT\nprint(t)", "# re-run: trains one more step\nstep()"):
        doubled, origin = rerun.doubled(new_notebook(cells=[new_code_cell(source)]))
        doubled.cells[1].outputs = [new_output("stream", name="stdout", text="steps: 1\n")]
        doubled.cells[2].outputs = [new_output("stream", name="stdout", text="steps: 2\n")]
        assert rerun.differing_counts(doubled, origin) == []
