"""Execute the course notebooks top to bottom, each in a fresh kernel with a cold Inductor cache.

    python tools/run_notebooks.py              # refresh the committed outputs and the README's run times
    python tools/run_notebooks.py --benchmark  # time them; only the README's run-time table is written
    python tools/run_notebooks.py 03 05        # only the notebooks whose names start so
    python tools/run_notebooks.py --lax --fallback disabled     # COURSE_DISABLE_COMPILE=1
    python tools/run_notebooks.py --lax --fallback no-compiler  # no C++ compiler reachable
    python tools/run_notebooks.py --rerun      # Run All twice in one kernel (tools/rerun.py)

Every notebook gets its own empty TORCHINDUCTOR_CACHE_DIR, so its run time is what a learner
with a cold cache sees, and no notebook leans on what another one compiled. The kernel is this
interpreter (the one pytest and nbval use), whatever kernelspecs the machine has.

Writing outputs or timing needs an idle machine: before each notebook the CPU use of everything
else is sampled, and the run stops if it is busy (timings would be several times too slow).
Lax runs (--lax) check that every cell runs (asserts hold), compare no output, write nothing,
and print a table of what passed; they do not need an idle machine.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools import rerun, workshop_plan  # noqa: E402
from tools.rerun import IGNORE_OUTPUT_TAG  # noqa: E402
from tools.setup_cell import SETUP_METADATA, SETUP_TAG, setup_cell_source  # noqa: E402
from tools.workshop_plan import core_path_flags, solution_flags  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BUDGET_S = 180
#: Above this CPU use by others (percent of all CPUs, sampled over BUSY_SAMPLE_S) timings are not honest.
BUSY_PERCENT = 25
BUSY_SAMPLE_S = 3.0
#: How many samples before refusing: busy for all of them (about half a minute) means other work.
BUSY_SAMPLES = 10
SKIP_LINE = "Skipped (needs Inductor)"
# Names a C++ compiler goes by; the no-compiler run hides all of them.
COMPILER_NAME = re.compile(r"^(g\+\+|gcc|c\+\+|cc|clang(\+\+)?|cl|icpx|icx)(-[\d.]+)?(\.exe)?$|^clang", re.I)
# Colab opens these notebooks on a GPU runtime (they all run on a CPU too)...
COLAB_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}
# ...except these, whose lesson is the CPU's (09: a T4's float16 activations never fuse int8; 11:
# every start runs on the CPU).
CPU_RUNTIME = {"09_quantized_decoding.ipynb", "11_cold_start.ipynb"}


def colab_metadata(name: str) -> dict:
    """The notebook metadata that picks the Colab runtime notebook `name` opens on.

    >>> colab_metadata("09_quantized_decoding.ipynb")
    {'colab': {'provenance': []}}
    """
    if name in CPU_RUNTIME:
        return {"colab": {"provenance": []}}
    return copy.deepcopy(COLAB_METADATA)


def sync_setup_cell(notebook: nbformat.NotebookNode, name: str) -> None:
    """Rewrite the tagged setup cell from the template (the repository URL's one source), and the
    Colab runtime that notebook `name` opens on."""
    for cell in notebook.cells:
        if SETUP_TAG in cell.get("metadata", {}).get("tags", []):
            cell.source = setup_cell_source()
            cell.metadata.update(copy.deepcopy(SETUP_METADATA))
            notebook.metadata.pop("accelerator", None)
            notebook.metadata.update(colab_metadata(name))
            return
    raise SystemExit(f"no cell tagged {SETUP_TAG!r}: add the setup cell first")


RUN_TIME_LINE = re.compile(r"^\*\*Run time:\*\*.*$", re.MULTILINE)


#: The title cell's run-time line. It types no figure: the measured seconds live in one place, the
#: README's run-time table, which the run that measured them writes.
RUN_TIME_TEXT = (
    "**Run time:** measured on a 2-core CPU with a cold Inductor cache by `make notebooks`: see the "
    "README's [run-time table](../README.md#workshop-plan)."
)


def others_cpu_percent(samples: int = BUSY_SAMPLES) -> float:
    """CPU use of the whole machine while this process waits (no kernel runs): the lowest of a few
    samples of BUSY_SAMPLE_S each, so a blip (the last kernel exiting) does not stop a long run."""
    lowest = 100.0
    for _ in range(samples):
        lowest = min(lowest, psutil.cpu_percent(interval=BUSY_SAMPLE_S))
        if lowest <= BUSY_PERCENT:
            break
    return lowest


def this_interpreter_kernel(scratch: Path) -> None:
    """Point the kernel named python3 at this interpreter (JUPYTER_PATH comes first in the search)."""
    spec = scratch / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"})
    )
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(scratch), os.environ.get("JUPYTER_PATH")]))


def compiler_shims(scratch: Path, hide: bool) -> Path:
    """A PATH folder: with ``hide``, every program on the PATH but C++ compilers; else logging compilers.

    Logging shims record each compiler call in ``compiler-calls.log`` (the escape-hatch run must
    make none) and then run the real compiler.
    """
    shims = scratch / "bin"
    shims.mkdir()
    log = scratch / "compiler-calls.log"
    log.touch()
    seen = set()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or not Path(folder).is_dir():
            continue
        for program in sorted(Path(folder).iterdir()):
            if program.name in seen or not os.access(program, os.X_OK) or program.is_dir():
                continue
            seen.add(program.name)
            if not COMPILER_NAME.match(program.name):
                if hide:
                    (shims / program.name).symlink_to(program)
            elif not hide:
                shim = shims / program.name
                shim.write_text(f'#!/bin/sh\necho "{program.name} $*" >> "{log}"\nexec "{program}" "$@"\n')
                shim.chmod(0o755)
    return shims


def _cell_seconds(cell: nbformat.NotebookNode) -> float:
    """How long a cell ran (nbclient's timing record; removed before a notebook is committed)."""
    from datetime import datetime

    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = lambda stamp: datetime.fromisoformat(stamp.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


class CapReached(Exception):
    """The notebook's time cap ran out while (or before) this cell ran."""


def _execute(client: NotebookClient, cap: float | None) -> None:
    """``client.execute()``, or cell by cell within ``cap`` seconds (what ran so far is kept)."""
    if cap is None:
        client.execute()
        return
    deadline = time.perf_counter() + cap
    client.reset_execution_trackers()
    with client.setup_kernel():
        for index, cell in enumerate(client.nb.cells):
            left = deadline - time.perf_counter()
            if left <= 0:
                raise CapReached(f"stopped at its cap of {cap:.0f} s before cell {index}")
            client.timeout = max(1, min(1200, int(left)))
            try:
                client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
            except CellTimeoutError:
                raise CapReached(f"stopped at its cap of {cap:.0f} s in cell {index}") from None


def run(
    path: Path,
    write: bool,
    save_dir: Path | None = None,
    cap: float | None = None,
    twice: bool = False,
) -> tuple[float, float, str | None, int]:
    """Execute one notebook; return seconds, the core path's seconds, the first failure (or None),
    and skipped-cell lines. With ``save_dir``, the executed notebook is also written there (with
    each cell's timing record); with ``cap``, the run stops after that many seconds; with ``twice``,
    it runs as ``tools/rerun.py`` says, and a cell whose counts differ on its re-run is a failure."""
    notebook = nbformat.read(path, as_version=4)
    sync_setup_cell(notebook, path.name)
    origin = None
    if twice:
        notebook, origin = rerun.doubled(notebook)
    if save_dir is not None:  # a saved run shows only what ran (a stopped one stops early)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
    failure = None
    with tempfile.TemporaryDirectory(prefix="course-inductor-") as cache_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        client = NotebookClient(
            notebook,
            timeout=1200,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
            record_timing=True,  # per cell, for the core path's run time; removed before writing
            allow_errors=twice,  # a re-run reports every cell that fails, not only the first
        )
        start = time.perf_counter()
        try:
            _execute(client, cap)
        except CellExecutionError as error:
            if write:
                raise
            failure = _first_failure(notebook, error)  # a re-run allows errors: never here
        except CapReached as error:
            failure = str(error)
        seconds = time.perf_counter() - start
    if twice and failure is None:
        failed = rerun.failed_cells(notebook, origin)
        differing = rerun.differing_counts(notebook, origin)
        if failed or differing:
            failure = "; ".join(failed + [f"a re-run printed other counts: {line}" for line in differing])
    core_seconds = sum(
        _cell_seconds(cell)
        for cell, core in zip(notebook.cells, core_path_flags(notebook.cells), strict=True)
        if cell.cell_type == "code" and core
    )
    if write:
        for cell in notebook.cells:
            cell.get("metadata", {}).pop("execution", None)
        hide_solution_outputs(notebook)
        title = notebook.cells[0]
        if not RUN_TIME_LINE.search(title.source):
            raise SystemExit(f"{path.name}: the title cell has no '**Run time:**' line")
        title.source = RUN_TIME_LINE.sub(RUN_TIME_TEXT, title.source, count=1)
        nbformat.write(notebook, path)
    if save_dir is not None:
        save_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, save_dir / path.name)
    skipped = sum(
        "".join(out.get("text", "")).count(SKIP_LINE)
        for cell in notebook.cells
        for out in cell.get("outputs", [])
    )
    return seconds, core_seconds, failure, skipped


def hide_solution_outputs(notebook: nbformat.NotebookNode) -> None:
    """Solution cells are committed without outputs (they would give the answers away); nbval
    still runs them, comparing nothing."""
    for cell, in_solutions in zip(notebook.cells, solution_flags(notebook.cells), strict=True):
        if in_solutions and cell.cell_type == "code":
            cell.outputs = []
            tags = cell.metadata.setdefault("tags", [])
            if IGNORE_OUTPUT_TAG not in tags:
                tags.append(IGNORE_OUTPUT_TAG)


def _first_failure(notebook: nbformat.NotebookNode, error: CellExecutionError) -> str:
    for index, cell in enumerate(notebook.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {index}: {out.get('ename')}: {out.get('evalue', '')[:160]}"
    return str(error).strip().splitlines()[-1][:200]


def write_readme_table(rows: list[dict], label: str) -> None:
    """Replace the README's run-time table (between its markers) with the one just measured."""
    import datetime
    import platform

    from helpers.env import cpu_name

    readme = ROOT / "README.md"
    start, end = "<!-- run-times -->", "<!-- /run-times -->"
    text = readme.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise SystemExit(f"README.md has no {start} ... {end} markers")
    lines = [
        start,
        f"Measured by `make notebooks` (or `make benchmark`) on {datetime.date.today().isoformat()}: "
        f"{cpu_name()}, "
        f"{os.cpu_count()} CPUs, {platform.system()}, {label}; each notebook in a fresh kernel with "
        "its own cold Inductor cache, on an otherwise idle machine.",
        "",
        "| notebook | run time | core path |",
        "|---|---|---|",
        *(f"| {r['notebook']} | {r['seconds']:.0f} s | {r['core_seconds']:.0f} s |" for r in rows),
        f"| total | {sum(r['seconds'] for r in rows):.0f} s | {sum(r['core_seconds'] for r in rows):.0f} s |",
        end,
    ]
    head, rest = text.split(start, 1)
    readme.write_text(head + "\n".join(lines) + rest.split(end, 1)[1], encoding="utf-8")
    print("README.md: run-time table updated")


def update_readme_rows(rows: list[dict]) -> None:
    """Rewrite only these notebooks' rows (and the total) of the README's run-time table.

    A re-run of some notebooks (``make notebooks`` with prefixes) keeps the table in step with the
    title cells it just rewrote; the other rows keep the figures of the run that measured them.
    """
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    for row in rows:
        text, found = re.subn(
            rf"^\| {re.escape(row['notebook'])} \| \d+ s \| \d+ s \|$",
            f"| {row['notebook']} | {row['seconds']:.0f} s | {row['core_seconds']:.0f} s |",
            text,
            flags=re.MULTILINE,
        )
        if not found:
            raise SystemExit(f"README.md's run-time table has no row for {row['notebook']}: run them all")
    measured = re.findall(r"^\| \d\d_\w+\.ipynb \| (\d+) s \| (\d+) s \|$", text, flags=re.MULTILINE)
    total, core = (sum(int(pair[i]) for pair in measured) for i in (0, 1))
    text = re.sub(
        r"^\| total \| \d+ s \| \d+ s \|$",
        f"| total | {total} s | {core} s |",
        text,
        count=1,
        flags=re.MULTILINE,
    )
    readme.write_text(text, encoding="utf-8")
    print("README.md: run-time rows updated for " + ", ".join(r["notebook"] for r in rows))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("prefixes", nargs="*", help="run only notebooks whose names start with these")
    parser.add_argument("--benchmark", action="store_true", help="time only; do not write outputs")
    parser.add_argument("--lax", action="store_true", help="check that every cell runs; write nothing")
    parser.add_argument(
        "--fallback",
        choices=["disabled", "no-compiler"],
        help="with --lax: run with COURSE_DISABLE_COMPILE=1, or with no C++ compiler reachable",
    )
    parser.add_argument(
        "--readme", action="store_true", help="with --benchmark: write the run-time table into README.md"
    )
    parser.add_argument("--json", type=Path, help="with --lax: also write the results to this file")
    parser.add_argument(
        "--save-dir", type=Path, help="with --lax: write each executed notebook (outputs included) here"
    )
    parser.add_argument("--cap", type=float, help="with --lax: stop each notebook after this many seconds")
    parser.add_argument(
        "--rerun", action="store_true", help="Run All twice in one kernel, lax (see tools/rerun.py)"
    )
    args = parser.parse_args()
    args.lax = args.lax or args.rerun
    if (args.fallback or args.save_dir or args.cap) and not args.lax:
        parser.error("--fallback, --save-dir and --cap go with --lax")
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if args.prefixes:
        paths = [p for p in paths if p.name.startswith(tuple(args.prefixes))]
    if not paths:
        print("no notebooks matched", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="course-run-"))
    try:
        this_interpreter_kernel(scratch)
        if args.fallback == "disabled":
            os.environ["COURSE_DISABLE_COMPILE"] = "1"
            os.environ["PATH"] = os.pathsep.join(
                [str(compiler_shims(scratch, hide=False)), os.environ["PATH"]]
            )
        elif args.fallback == "no-compiler":
            os.environ["PATH"] = str(compiler_shims(scratch, hide=True))
            os.environ["CXX"] = os.environ["CC"] = str(scratch / "no-such-compiler")
        return _run_all(paths, args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_all(paths: list[Path], args: argparse.Namespace, scratch: Path) -> int:
    import torch
    import transformers

    label = f"torch {torch.__version__}, transformers {transformers.__version__}"
    if args.rerun:
        label += ", Run All twice"
    if args.fallback:
        label += f", fallback: {args.fallback}"
    print(f"{'lax run' if args.lax else 'run'} with {label}", flush=True)
    rows = []
    for path in paths:
        if not args.lax:
            busy = others_cpu_percent()
            if busy > BUSY_PERCENT:
                print(
                    f"refusing to run {path.name}: the machine is {busy:.0f}% busy (over {BUSY_PERCENT}%) "
                    "before it starts; timings would not be honest. Stop the other work and run again.",
                    file=sys.stderr,
                )
                return 3
        print(f"running {path.name} ...", flush=True)
        seconds, core_seconds, failure, skipped = run(
            path,
            write=not (args.benchmark or args.lax),
            save_dir=args.save_dir,
            cap=args.cap,
            twice=args.rerun,
        )
        rows.append(
            {
                "notebook": path.name,
                "seconds": round(seconds, 1),
                "core_seconds": round(core_seconds, 1),
                "failure": failure,
                "skipped": skipped,
            }
        )
        status = "FAILED " + failure if failure else "ok"
        over = "  OVER BUDGET" if seconds > BUDGET_S else ""
        print(
            f"  {seconds:6.1f} s  {status}{over}" + (f"  ({skipped} cells skipped)" if skipped else ""),
            flush=True,
        )
    compiler_calls = []
    if args.fallback == "disabled":
        compiler_calls = (scratch / "compiler-calls.log").read_text().splitlines()
    if args.lax:  # the table a maintainer pastes into the README names the device it ran on
        from helpers.device import best_device
        from helpers.env import hardware_name

        device = os.environ.get("COURSE_DEVICE") or best_device()
        print(f"\n{label}, device {device}: {hardware_name(device)}, {os.cpu_count()} CPUs")
    print(f"\n| notebook | result | run time ({os.cpu_count()} CPUs) | cells skipped |\n|---|---|---|---|")
    for row in rows:
        result = f"failed: {row['failure']}" if row["failure"] else "passed"
        print(f"| {row['notebook']} | {result} | {row['seconds']:.0f} s | {row['skipped']} |")
    passed = sum(not r["failure"] for r in rows)
    print(f"| total | {passed}/{len(rows)} passed | {sum(r['seconds'] for r in rows):.0f} s | |")
    if args.fallback == "disabled":
        print(f"C++ compiler calls with the escape hatch set: {len(compiler_calls)}")
        for call in compiler_calls[:5]:
            print("  " + call[:160])
    # `make notebooks` measures exactly what `make benchmark` does, so both refresh the table.
    if (
        (args.readme or not (args.benchmark or args.lax))
        and not any(r["failure"] for r in rows)
        and not args.prefixes
    ):
        write_readme_table(rows, label)
        workshop_plan.write_readme()
    elif not (args.benchmark or args.lax) and args.prefixes and not any(r["failure"] for r in rows):
        update_readme_rows(rows)
        workshop_plan.write_readme()
    if args.json:
        args.json.write_text(
            json.dumps({"label": label, "rows": rows, "compiler_calls": compiler_calls}, indent=1)
        )
    failed = any(r["failure"] for r in rows) or bool(compiler_calls)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
