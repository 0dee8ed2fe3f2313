"""Execute the course notebooks top to bottom, each in a fresh kernel with a cold Inductor cache.

    python tools/run_notebooks.py              # refresh the committed outputs (make notebooks)
    python tools/run_notebooks.py --benchmark  # time them, write nothing (make benchmark)
    python tools/run_notebooks.py 03 05        # only the notebooks whose names start so

Every notebook gets its own empty TORCHINDUCTOR_CACHE_DIR, so its run time is what a learner
with a cold cache sees, and no notebook leans on what another one compiled.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.setup_cell import SETUP_TAG, setup_cell_source  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
BUDGET_S = 180


def sync_setup_cell(notebook: nbformat.NotebookNode) -> None:
    """Rewrite the tagged setup cell from the template (the repository URL's one source)."""
    for cell in notebook.cells:
        if SETUP_TAG in cell.get("metadata", {}).get("tags", []):
            cell.source = setup_cell_source()
            return
    raise SystemExit(f"no cell tagged {SETUP_TAG!r}: add the setup cell first")


def run(path: Path, write: bool) -> float:
    notebook = nbformat.read(path, as_version=4)
    sync_setup_cell(notebook)
    with tempfile.TemporaryDirectory(prefix="course-inductor-") as cache_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        client = NotebookClient(
            notebook,
            timeout=1200,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
            record_timing=False,
        )
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
    if write:
        nbformat.write(notebook, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("prefixes", nargs="*", help="run only notebooks whose names start with these")
    parser.add_argument("--benchmark", action="store_true", help="time only; do not write outputs")
    args = parser.parse_args()
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if args.prefixes:
        paths = [p for p in paths if p.name.startswith(tuple(args.prefixes))]
    if not paths:
        print("no notebooks matched", file=sys.stderr)
        return 2
    rows = []
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        seconds = run(path, write=not args.benchmark)
        rows.append((path.name, seconds))
        print(f"  {seconds:6.1f} s{'  OVER BUDGET' if seconds > BUDGET_S else ''}", flush=True)
    print(f"\n| notebook | run time, cold Inductor cache ({os.cpu_count()} CPUs) |\n|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.0f} s |")
    print(f"| total | {sum(s for _, s in rows):.0f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
