"""The README's workshop plan, computed from the notebooks and their measured run times.

    python tools/workshop_plan.py          # print the plan
    python tools/workshop_plan.py --write  # write it between the README's workshop-plan markers

`make notebooks` runs this after it measures the run times. A workshop slot is 90 minutes and
holds, per notebook: reading the core path at READING_WORDS_PER_MINUTE, running the core path's
cells (their run time on 2 CPUs, measured by `make notebooks` and kept in the README's run-time
table), and the exercises at EXERCISE_MINUTES each (an assumption: read, change the code, compile,
read the check). The core path is what `../shared/tools/density.py` counts: markdown outside the
title cell, "Deep dive (optional)" sections, Solutions and folded <details> blocks.
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
EXERCISE_MINUTES = 6
SLOT_MINUTES = 90
#: Four slots in the course's order (guarded compile, modes, graph breaks; recompilation,
#: caching, regions; training and decoding; debugging, shipping and custom operators).
SLOTS = {
    "1 · compiling and graphs": ("01", "02", "03"),
    "2 · shapes, caches, regions": ("04", "05", "06"),
    "3 · training and decoding": ("07", "08", "09"),
    "4 · debugging, shipping, custom ops": ("10", "11", "12"),
}

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
    """One row per notebook: its slot, reading, running and exercise minutes, deep dives."""
    seconds = core_run_seconds(readme_text)
    rows = []
    for slot, prefixes in SLOTS.items():
        for prefix in prefixes:
            path = next(NOTEBOOKS.glob(f"{prefix}_*.ipynb"))
            cells = nbformat.read(path, as_version=4).cells
            if path.name not in seconds:
                raise SystemExit(
                    f"README's run-time table has no core-path time for {path.name}: make notebooks"
                )
            words = core_words(cells)
            row = {
                "slot": slot,
                "notebook": path.name,
                "words": words,
                "reading": math.ceil(words / READING_WORDS_PER_MINUTE),
                "running": math.ceil(seconds[path.name] / 60),
                "exercises": exercise_count(cells),
                "deep_dives": deep_dives(cells),
            }
            row["minutes"] = row["reading"] + row["running"] + row["exercises"] * EXERCISE_MINUTES
            rows.append(row)
    return rows


def render(readme_text: str) -> str:
    """The workshop plan as Markdown (between the README's markers)."""
    rows = plan_rows(readme_text)
    lines = [
        START,
        f"Computed by `python tools/workshop_plan.py` from the notebooks and the run times above: reading "
        f"the core path at {READING_WORDS_PER_MINUTE} words a minute, running its cells on 2 CPUs, and "
        f"{EXERCISE_MINUTES} minutes an exercise.",
        "",
        "| slot | notebook | core words | reading | running | exercises | minutes | deep dives to skip |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for slot in SLOTS:
        in_slot = [r for r in rows if r["slot"] == slot]
        for r in in_slot:
            dives = "; ".join(r["deep_dives"]) or "none"
            lines.append(
                f"| {slot} | [{r['notebook'][:2]}](notebooks/{r['notebook']}) | {r['words']} | "
                f"{r['reading']} min | {r['running']} min | {r['exercises']} | {r['minutes']} min | {dives} |"
            )
        total = sum(r["minutes"] for r in in_slot)
        lines.append(f"| {slot} | **slot total** | | | | | **{total} min** of {SLOT_MINUTES} | |")
    lines.append(END)
    return "\n".join(lines)


def slot_minutes(readme_text: str) -> dict[str, int]:
    """Minutes each slot needs."""
    rows = plan_rows(readme_text)
    return {slot: sum(r["minutes"] for r in rows if r["slot"] == slot) for slot in SLOTS}


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
