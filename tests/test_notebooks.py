"""Structure every notebook must have, so that strict nbval really compares it."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tools.setup_cell import SETUP_TAG, colab_url, setup_cell_source

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
IGNORE_MARK = "# NBVAL_IGNORE_OUTPUT"
# Hiding compile failures behind eager, in any spelling: config.suppress_errors = True, setattr, patch.
SUPPRESS_ERRORS = re.compile(r"suppress_errors\W{0,6}(=|,|:)\s*(True|1)\b")
# A path of the machine that executed the notebook, in any committed output (ignored cells too).
MACHINE_PATH = re.compile(r"(/home/\w|/root/|/Users/\w|/work/|/var/folders/|/private/var/|[A-Z]:\\\\Users)")
FIGURE = re.compile(r"(?<![\w.])\d+(\.\d+)?\s?(x|×|ms|s|%|GB/s|MB/s|tokens/s|steps/s)(?![\w/])")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


def test_names_are_numbered_in_sequence():
    numbers = [int(p.name[:2]) for p in NOTEBOOKS if re.match(r"\d\d_[a-z0-9_]+\.ipynb$", p.name)]
    assert len(numbers) == len(NOTEBOOKS), "notebook names must look like 01_topic_name.ipynb"
    assert numbers == list(range(1, len(numbers) + 1))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_executed_top_to_bottom(path):
    code = [c for c in _read(path).cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert None not in counts, "a code cell was never executed: nbval would not compare it"
    assert counts == list(range(1, len(code) + 1)), "run the notebook top to bottom (make notebooks)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_matches_the_template(path):
    tagged = [c for c in _read(path).cells if SETUP_TAG in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"exactly one cell must carry the {SETUP_TAG!r} tag"
    assert tagged[0].source == setup_cell_source(), "run `make notebooks` to refresh the setup cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_anatomy(path):
    cells = _read(path).cells
    title = cells[0]
    assert title.cell_type == "markdown" and title.source.startswith("# ")
    for needed in ("Prerequisites", "Run time", colab_url(path.name)):
        assert needed in title.source, f"the title cell must mention {needed!r}"
    text = "\n".join(c.source for c in cells)
    assert "## Summary" in text and "## Exercises" in text
    index = NOTEBOOKS.index(path)
    navigation = cells[-1].source
    if index > 0:
        assert NOTEBOOKS[index - 1].name in navigation, "the last cell must link the previous notebook"
    if index + 1 < len(NOTEBOOKS):
        assert NOTEBOOKS[index + 1].name in navigation, "the last cell must link the next notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_hidden_failures(path):
    for cell in _read(path).cells:
        if cell.cell_type != "code":
            continue
        first_line = cell.source.splitlines()[0] if cell.source else ""
        if "NBVAL_IGNORE_OUTPUT" in first_line:
            assert first_line == IGNORE_MARK, "nbval needs the marker alone on the first line"
        assert not SUPPRESS_ERRORS.search(cell.source), "never hide compile failures"
        for output in cell.get("outputs", []):
            assert output.output_type != "error", "a committed cell raised an error"


def test_the_suppress_errors_check_catches_every_spelling():
    for spelling in [
        "torch._dynamo.config.suppress_errors = True",
        "torch._dynamo.config.suppress_errors=True",
        'setattr(torch._dynamo.config, "suppress_errors", True)',
        'torch._dynamo.config.patch({"suppress_errors": True})',
        "torch._dynamo.config.patch(suppress_errors=True)",
    ]:
        assert SUPPRESS_ERRORS.search(spelling), spelling
    assert not SUPPRESS_ERRORS.search("torch._dynamo.config.suppress_errors = False")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_machine_path_in_outputs(path):
    for index, cell in enumerate(_read(path).cells):
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
            found = MACHINE_PATH.search(text)
            assert not found, f"cell {index} prints a path of the machine that ran it: {found.group(0)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_measured_figure_typed_into_markdown(path):
    # Times, speedups, percentages and rates are printed by the code that measured them.
    for index, cell in enumerate(_read(path).cells):
        if cell.cell_type != "markdown":
            continue
        prose = re.sub(r"`[^`]*`", "", cell.source)  # code spans may hold literal values
        prose = re.sub(r"^\*\*Run time:\*\*.*$", "", prose, flags=re.MULTILINE)  # written by the run
        found = FIGURE.search(prose)
        assert not found, f"markdown cell {index} types a measured figure: {found.group(0)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_title_run_time_is_the_readmes(path):
    # Both are written by the run that measured them (tools/run_notebooks.py).
    title = _read(path).cells[0].source
    found = re.search(r"^\*\*Run time:\*\* (\d+) s on a \d+-CPU machine", title, re.MULTILINE)
    assert found, "the title's run-time line is written by `make notebooks`"
    readme = (NOTEBOOK_DIR.parent / "README.md").read_text(encoding="utf-8")
    assert f"| {path.name} | {found.group(1)} s |" in readme, "README's run-time table disagrees"


def test_one_kernelspec_for_all_notebooks():
    specs = {p.name: _read(p).metadata.get("kernelspec", {}).get("name") for p in NOTEBOOKS}
    assert set(specs.values()) == {"python3"}, specs
