"""Structure every notebook must have, so that strict nbval really compares it."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tools.run_notebooks import IGNORE_OUTPUT_TAG, RUN_TIME_TEXT, colab_metadata
from tools.setup_cell import SETUP_METADATA, SETUP_TAG, colab_url, repository_url, setup_cell_source
from tools.workshop_plan import solution_flags

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
IGNORE_MARK = "# NBVAL_IGNORE_OUTPUT"
# Hiding compile failures behind eager, in any spelling: config.suppress_errors = True, setattr, patch.
SUPPRESS_ERRORS = re.compile(r"suppress_errors\W{0,6}(=|,|:)\s*(True|1)\b")
SUPPRESS_DEMO = "# demonstrates suppress_errors:"
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
    # Collapsed in Colab (a form) and JupyterLab (hidden source): the lesson is what a learner reads.
    for key, value in SETUP_METADATA.items():
        assert tagged[0].metadata.get(key) == value, f"the setup cell's metadata needs {key}={value!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_opens_the_runtime_the_notebook_asks_for(path):
    metadata = _read(path).metadata
    wanted = colab_metadata(path.name)
    assert metadata.get("accelerator") == wanted.get("accelerator"), "run `make notebooks`"
    assert metadata.get("colab") == wanted["colab"], "run `make notebooks`"
    if "accelerator" not in wanted:  # a CPU runtime: the title cell says why
        assert "CPU runtime" in _read(path).cells[0].source


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
        # The one exception: a cell that shows what suppress_errors hides, and counts it.
        shows_it = cell.source.startswith(SUPPRESS_DEMO) and "CompileCounts" in cell.source
        assert shows_it or not SUPPRESS_ERRORS.search(cell.source), "never hide compile failures"
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
        found = FIGURE.search(prose)
        assert not found, f"markdown cell {index} types a measured figure: {found.group(0)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_title_run_time_points_to_the_readmes(path):
    # The seconds live only in the README's table, written by the run that measured them.
    title = _read(path).cells[0].source
    assert RUN_TIME_TEXT in title, "the title's run-time line is written by `make notebooks`"
    readme = (NOTEBOOK_DIR.parent / "README.md").read_text(encoding="utf-8")
    assert re.search(rf"^\| {re.escape(path.name)} \| \d+ s \| \d+ s \|$", readme, re.MULTILINE), (
        "README's run-time table has no row for this notebook"
    )


def test_one_kernelspec_for_all_notebooks():
    specs = {p.name: _read(p).metadata.get("kernelspec", {}).get("name") for p in NOTEBOOKS}
    assert set(specs.values()) == {"python3"}, specs


DEEP_DIVE = "Deep dive (optional)"
HEADING = re.compile(r"^(#{2,4}) (.*)$", re.MULTILINE)
SECTION_NUMBER = re.compile(r"^\d+(\.\d+)*\.?\s+")


def _deep_dive_flags(cells) -> list[bool]:
    """For each cell, whether it lies in a section whose heading starts a deep dive."""
    flags, level = [], None  # level: the heading depth of the deep dive we are in
    for cell in cells:
        if cell.cell_type == "markdown":
            for hashes, title in HEADING.findall(cell.source):
                if SECTION_NUMBER.sub("", title).startswith(DEEP_DIVE):
                    level = len(hashes) if level is None else min(level, len(hashes))
                elif level is not None and len(hashes) <= level:
                    level = None
        flags.append(level is not None)
    return flags


def _names(source: str) -> tuple[set[str], set[str], set[str]]:
    """Module-level names a cell defines, every name it reads, and every name it binds anywhere."""
    import ast

    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    tree = ast.parse(code)
    defined: set[str] = set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

    def top_level(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(child.name)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                defined.update((a.asname or a.name).split(".")[0] for a in child.names)
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                defined.add(child.id)
            if not isinstance(child, scopes):
                top_level(child)

    top_level(tree)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args + n.kwonlyargs}
    return defined, read, bound


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_core_path_runs_without_the_deep_dives(path):
    # A workshop skips every "Deep dive (optional)" section: no later core cell may read a name
    # that only a deep dive defines (unless it asks `"name" in globals()` first).
    cells = _read(path).cells
    only_in_deep_dives: set[str] = set()
    for cell, deep in zip(cells, _deep_dive_flags(cells), strict=True):
        if cell.cell_type != "code":
            continue
        defined, read, bound = _names(cell.source)
        if deep:
            only_in_deep_dives |= defined
            continue
        checked = set(re.findall(r"""["'](\w+)["'] (?:not )?in globals\(\)""", cell.source))
        if checked & only_in_deep_dives:  # the cell handles a skipped deep dive itself
            continue
        used = (read - bound) & only_in_deep_dives
        assert not used, (
            f"a core cell reads {sorted(used)}, which only a deep dive defines:\n{cell.source[:200]}"
        )
        only_in_deep_dives -= defined


def _outside_functions(node):
    """Every node under ``node`` except those inside a function, lambda or class body."""
    import ast

    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from _outside_functions(child)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_unmarked_cells_read_no_name_only_a_skipped_cell_defines(path):
    # Where compiling can't run, cells marked `# requires: inductor...` print one line instead of
    # running: a later unmarked cell that reads a name only they define fails there (11 did, in
    # CI's fallback run), unless it asks `"name" in globals()` first.
    import ast

    from helpers.guard import REQUIRES_INDUCTOR_MARK

    only_in_marked: set[str] = set()
    defined_unmarked: set[str] = set()
    for cell in _read(path).cells:
        if cell.cell_type != "code":
            continue
        defined, _, bound = _names(cell.source)
        if any(line.strip().startswith(REQUIRES_INDUCTOR_MARK) for line in cell.source.splitlines()[:3]):
            only_in_marked |= defined - defined_unmarked
            continue
        defined_unmarked |= defined
        # Reads at the cell's top level run now; a function's body runs when something calls it.
        tree = ast.parse(
            "\n".join(line for line in cell.source.splitlines() if not line.startswith(("%", "!")))
        )
        read = {node.id for node in _outside_functions(tree) if isinstance(node, ast.Name)}
        bound |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler) and node.name}
        checked = set(re.findall(r"""["'](\w+)["'] (?:not )?in globals\(\)""", cell.source))
        used = (read - bound - checked) & only_in_marked
        assert not used, (
            f"an unmarked cell reads {sorted(used)}, which only a skipped cell defines:\n{cell.source[:200]}"
        )
        only_in_marked -= defined


def test_the_readme_workshop_plan_names_every_deep_dive():
    readme = (NOTEBOOK_DIR.parent / "README.md").read_text(encoding="utf-8")
    plan = readme.split("<!-- workshop-plan -->", 1)[-1].split("<!-- /workshop-plan -->", 1)[0]
    assert plan.strip(), "README.md needs its workshop plan between <!-- workshop-plan --> markers"
    for path in NOTEBOOKS:
        row = next((line for line in plan.splitlines() if f"notebooks/{path.name}" in line), "")
        assert row, f"the workshop plan has no row for {path.name}"
        for _depth, title in HEADING.findall("\n".join(c.source for c in _read(path).cells)):
            if DEEP_DIVE in title:
                topic = title.split(DEEP_DIVE, 1)[1].lstrip(": ").split(",")[0].replace("`", "")
                assert topic.lower()[:24] in row.replace("`", "").lower(), (
                    f"the workshop plan's row for {path.name} does not name the deep dive {title!r}"
                )


# Facts of the machine that ran a notebook: a compared output holding one passes strict nbval only
# on CPUs like it (02 printed "CPU capability: AVX2" and failed on an AVX512 machine). From what
# helpers.env's card and the notebooks print: capability names, CPU vendors and models, cache
# sizes, thread counts. Such outputs belong in a cell marked `# NBVAL_IGNORE_OUTPUT`.
HARDWARE_FACT = re.compile(
    r"\b(AVX-?512\w*|AVX2|AVX|AMX\w*|NEON|SVE2?|VSX|ZVECTOR)\b"
    r"|\b(Intel|AMD|EPYC|Xeon|Ryzen|Threadripper|GenuineIntel|AuthenticAMD|Graviton|Neoverse|Apple M\d)\b"
    r"|\b(L[123]|last[- ]level)( data)? cache\b[^\n]{0,40}\d"
    r"|\d+(\.\d+)?\s?(KiB|MiB|KB|MB)\s+(of\s+)?(L[123]|last[- ]level)"
    r"|\b\d+ (CPU )?threads\b|\bon \d+ CPUs\b",
    re.IGNORECASE,
)


def _compared_outputs(cells):
    """(cell index, text) of every output strict nbval compares (not in an ignored cell)."""
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or cell.source.startswith(IGNORE_MARK):
            continue
        for output in cell.get("outputs", []):
            parts = [output.get("text", "")]
            parts += [value for key, value in output.get("data", {}).items() if key.startswith("text/")]
            yield index, "".join("".join(part) if isinstance(part, list) else part for part in parts)


def test_the_hardware_check_catches_what_was_committed_before():
    for text in [
        "CPU capability: AVX2 | MKL in this build: True",
        "ility: AVX512 | MKL in this build: True",
        "CPU: AMD EPYC 7B13, 2 threads",
        "hardware: CPU: Intel(R) Xeon(R) Processor",
        "last-level cache: 32 MiB",
        "L3 cache 260 MiB",
        "a working set of 256 MiB past 32 MiB of L3",
        "torch uses 2 threads",
    ]:
        assert HARDWARE_FACT.search(text), text
    for text in ["graphs: 1, graph breaks: 0", "prepacked weights match eager", "model: 124 MiB of weights"]:
        assert not HARDWARE_FACT.search(text), text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_hardware_fact_in_compared_outputs(path):
    for index, text in _compared_outputs(_read(path).cells):
        found = HARDWARE_FACT.search(text)
        assert not found, (
            f"cell {index} prints {found.group(0)!r} in an output strict nbval compares: it differs "
            "between CPUs. Print it in a cell marked # NBVAL_IGNORE_OUTPUT."
        )


def test_the_setup_cell_template_is_valid_python():
    compile(setup_cell_source(), "setup cell", "exec")


def test_the_workshop_plan_is_computed_and_fits_its_slots():
    from tools import workshop_plan

    readme = (NOTEBOOK_DIR.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split(workshop_plan.START, 1)[1].split(workshop_plan.END, 1)[0]
    expected = workshop_plan.render(readme)
    assert workshop_plan.START + block + workshop_plan.END == expected, (
        "run python tools/workshop_plan.py --write"
    )
    over = {s: m for s, m in workshop_plan.slot_minutes(readme).items() if m > workshop_plan.SLOT_MINUTES}
    assert not over, f"a workshop slot is over {workshop_plan.SLOT_MINUTES} minutes: {over}"


def test_core_words_leave_out_the_title_deep_dives_solutions_and_folds():
    from tools.workshop_plan import core_code_words, core_words, deep_dives, exercise_count

    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md("# Title with five words"),
        code("import setup_things  # the setup cell"),
        md("## 1. Lesson\n\none two three"),
        md("<details><summary>Why</summary>\n\nfolded words here\n</details>\nfour"),
        code("x = 1"),
        md("## Deep dive (optional): caches, cold\n\nskipped words"),
        code("skipped = 2"),
        md("### inside the dive\n\nstill skipped"),
        md("## Summary\n\n- a point\n\n## Exercises\n\n**Exercise 1.** five\n\n**Exercise 2.** six"),
        md("## Solutions\n\nnot counted"),
    ]
    # density.py's rule: "## 1. Lesson" is two words, a folded block none, the last cell eleven.
    assert core_words(cells) == 5 + 1 + 11
    assert core_code_words(cells) == 2  # "x", "1": the setup cell and the deep dive's code left out
    assert deep_dives(cells) == ["caches, cold"]
    assert exercise_count(cells) == 2


def test_slots_fill_in_order_and_a_notebook_that_would_overflow_opens_the_next():
    from tools.workshop_plan import SLOT_MINUTES, assign_slots

    rows = assign_slots([{"minutes": m} for m in (40, 50, 1, SLOT_MINUTES + 5, 30)])
    assert [r["slot"] for r in rows] == [1, 1, 2, 3, 4]  # one notebook over 90 still gets a slot


def test_the_readme_start_box_clones_the_repository_of_pyproject():
    readme = (NOTEBOOK_DIR.parent / "README.md").read_text(encoding="utf-8")
    start_box = readme.split("## Start", 1)[1].split("```bash", 1)[1].split("```", 1)[0].strip()
    assert start_box.startswith(f"git clone {repository_url()}.git && cd "), start_box.splitlines()[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_solution_cells_commit_no_output_that_gives_the_answer_away(path):

    cells = _read(path).cells
    solutions = [
        c for c, flag in zip(cells, solution_flags(cells), strict=True) if flag and c.cell_type == "code"
    ]
    assert solutions, "the notebook has no solution cells under its '## Solutions' heading"
    for cell in solutions:
        assert not cell.outputs, "make notebooks commits solution cells without outputs"
        assert IGNORE_OUTPUT_TAG in cell.metadata.get("tags", []), (
            "nbval must not compare a solution's output"
        )
