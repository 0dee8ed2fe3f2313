"""The README's workshop plan, computed from the notebooks and their measured run times.

    python tools/workshop_plan.py          # print the plan
    python tools/workshop_plan.py --write  # write it between the README's workshop-plan markers

`make notebooks` runs this after it measures the run times. A workshop slot is 90 minutes and
holds, per notebook: a Colab start (COLAB_START_MINUTES: each notebook gets its own runtime, then
its setup cell installs the course), reading the core path's markdown at READING_WORDS_PER_MINUTE
and its code at CODE_WORDS_PER_MINUTE (the setup cell left out), running the core path's cells
(their run time on 2 CPUs, measured by `make notebooks` and kept in the README's run-time table),
and the exercises at EXERCISE_MINUTES each (read, change the code, compile, read the check). The
rates and minutes are assumptions, stated in the README with the plan. The core path is what
`../shared/tools/density.py` counts: everything outside the title cell, "Deep dive (optional)"
sections, Solutions and folded <details> blocks. Slots are filled in the course's order: a notebook
that would take its slot past 90 minutes opens the next one.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
README = ROOT / "README.md"
START, END = "<!-- workshop-plan -->", "<!-- /workshop-plan -->"

READING_WORDS_PER_MINUTE = 200
#: Code reads slower than prose: names, arguments and comments, taken in while the cell runs.
CODE_WORDS_PER_MINUTE = 150
EXERCISE_MINUTES = 6
#: Connecting a Colab runtime (one per notebook) and running the setup cell, which installs the course.
COLAB_START_MINUTES = 3
SLOT_MINUTES = 90

_HEADING = re.compile(r"^(#+)\s+(.*)")
_SKIPPED_SECTION = re.compile(r"deep dive|solutions", re.IGNORECASE)
DEEP_DIVE = "Deep dive (optional)"


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9_`'.-]+", text))


def _unfolded(text: str) -> str:
    return re.sub(r"<details>.*?</details>", " ", text, flags=re.S | re.I)


def _inside_sections(cells: list, title_matches) -> list[bool]:
    """For each cell, whether it lies under a heading whose title ``title_matches`` (until a heading
    of the same or a higher level)."""
    flags, level_in = [], None
    for cell in cells:
        if cell.cell_type == "markdown":
            heading = _HEADING.match(cell.source.strip())
            if heading:
                level = len(heading.group(1))
                if level_in is not None and level <= level_in:
                    level_in = None
                if level_in is None and title_matches(heading.group(2).strip()):
                    level_in = level
        flags.append(level_in is not None)
    return flags


def core_path_flags(cells: list) -> list[bool]:
    """For each cell, whether it is on the core path (not under a deep dive or Solutions heading)."""
    return [not inside for inside in _inside_sections(cells, _SKIPPED_SECTION.search)]


def solution_flags(cells: list) -> list[bool]:
    """For each cell, whether it is in a Solutions section (its outputs would give answers away)."""
    return _inside_sections(cells, lambda title: title.lower().startswith("solutions"))


def core_words(cells: list) -> int:
    """Markdown words on the core path, the title cell and folded blocks left out."""
    return sum(
        _words(_unfolded(cell.source))
        for index, (cell, core) in enumerate(zip(cells, core_path_flags(cells), strict=True))
        if index > 0 and core and cell.cell_type == "markdown"
    )


def core_code_words(cells: list) -> int:
    """Code words on the core path, the setup cell (the first code cell, collapsed) left out."""
    code = [
        cell
        for cell, core in zip(cells, core_path_flags(cells), strict=True)
        if core and cell.cell_type == "code"
    ]
    return sum(_words(cell.source) for cell in code[1:])


def exercise_count(cells: list) -> int:
    """Exercises set in the Exercises section (``**Exercise N`` in its markdown)."""
    text, inside = [], False
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():  # a heading may stand anywhere in a cell
            heading = _HEADING.match(line)
            if heading:
                inside = heading.group(2).strip().lower().startswith("exercises")
            elif inside:
                text.append(line)
    return len(set(re.findall(r"\*\*Exercise (\d+)", "\n".join(text))))


def deep_dives(cells: list) -> list[str]:
    """The titles of the notebook's deep dives, as a workshop skips them."""
    titles = []
    for cell in cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                heading = _HEADING.match(line)
                if heading and DEEP_DIVE in heading.group(2):
                    titles.append(heading.group(2).split(DEEP_DIVE, 1)[1].lstrip(": ").strip())
    return titles


def core_run_seconds(readme_text: str) -> dict[str, int]:
    """Each notebook's core-path run time, from the README's run-time table."""
    rows = re.findall(r"^\| (\d\d_\w+\.ipynb) \| \d+ s \| (\d+) s \|$", readme_text, flags=re.MULTILINE)
    return {name: int(seconds) for name, seconds in rows}


def plan_rows(readme_text: str) -> list[dict]:
    """One row per notebook, in the course's order: its slot, its minutes of each kind, deep dives."""
    seconds = core_run_seconds(readme_text)
    rows = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        if path.name not in seconds:
            raise SystemExit(f"README's run-time table has no core-path time for {path.name}: make notebooks")
        words, code_words = core_words(cells), core_code_words(cells)
        row = {
            "notebook": path.name,
            "words": words,
            "code_words": code_words,
            "reading": math.ceil(words / READING_WORDS_PER_MINUTE)
            + math.ceil(code_words / CODE_WORDS_PER_MINUTE),
            "running": math.ceil(seconds[path.name] / 60),
            "exercises": exercise_count(cells),
            "deep_dives": deep_dives(cells),
        }
        row["minutes"] = (
            COLAB_START_MINUTES + row["reading"] + row["running"] + row["exercises"] * EXERCISE_MINUTES
        )
        rows.append(row)
    return assign_slots(rows)


def assign_slots(rows: list[dict]) -> list[dict]:
    """Number the slots (``row["slot"]``, from 1) in the rows' order: a row that would take its slot
    past SLOT_MINUTES opens the next one.

    Example:
        >>> [r["slot"] for r in assign_slots([{"minutes": 50}, {"minutes": 40}, {"minutes": 10}])]
        [1, 1, 2]
    """
    slot, used = 1, 0
    for row in rows:
        if used and used + row["minutes"] > SLOT_MINUTES:
            slot, used = slot + 1, 0
        row["slot"], used = slot, used + row["minutes"]
    return rows


def render(readme_text: str) -> str:
    """The workshop plan as Markdown (between the README's markers)."""
    rows = plan_rows(readme_text)
    slots = sorted({r["slot"] for r in rows})
    lines = [
        START,
        f"Computed by `python tools/workshop_plan.py` from the notebooks and the run times above, "
        f"{len(slots)} slots of {SLOT_MINUTES} minutes filled in the course's order. Each notebook: "
        f"{COLAB_START_MINUTES} minutes to start its Colab runtime and run the setup cell; its core path's "
        f"markdown read at {READING_WORDS_PER_MINUTE} words a minute and its code at "
        f"{CODE_WORDS_PER_MINUTE}; its core cells' run time on 2 CPUs; {EXERCISE_MINUTES} minutes an "
        "exercise. The rates are assumptions; the run times were measured.",
        "",
        "| slot | notebook | core words (markdown + code) | reading | running | exercises | minutes "
        "| deep dives to skip |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for slot in slots:
        in_slot = [r for r in rows if r["slot"] == slot]
        for r in in_slot:
            dives = "; ".join(r["deep_dives"]) or "none"
            lines.append(
                f"| {slot} | [{r['notebook'][:2]}](notebooks/{r['notebook']}) | {r['words']} + "
                f"{r['code_words']} | {r['reading']} min | {r['running']} min | {r['exercises']} | "
                f"{r['minutes']} min | {dives} |"
            )
        total = sum(r["minutes"] for r in in_slot)
        lines.append(f"| {slot} | **slot total** | | | | | **{total} min** of {SLOT_MINUTES} | |")
    lines.append(END)
    return "\n".join(lines)


def slot_minutes(readme_text: str) -> dict[int, int]:
    """Minutes each slot needs."""
    minutes: dict[int, int] = {}
    for row in plan_rows(readme_text):
        minutes[row["slot"]] = minutes.get(row["slot"], 0) + row["minutes"]
    return minutes


def write_readme() -> None:
    """Replace the README's workshop plan with the computed one."""
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"README.md has no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    README.write_text(head + render(text) + rest.split(END, 1)[1], encoding="utf-8")
    print("README.md: workshop plan updated")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help="write the plan into README.md")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    if args.write:
        write_readme()
    else:
        print(render(text))
    over = {slot: m for slot, m in slot_minutes(text).items() if m > SLOT_MINUTES}
    for slot, minutes in over.items():
        print(f"slot {slot!r} needs {minutes} min, over {SLOT_MINUTES}", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
