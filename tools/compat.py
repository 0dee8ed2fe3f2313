"""Run every notebook lax on the oldest and newest torch/transformers the course accepts.

    python tools/compat.py             # every combination below (make test-compat)
    python tools/compat.py --only floor
    python tools/compat.py 03 05       # only these notebooks

Each combination gets its own virtual environment under ~/.cache/torch-compile-course/compat
(or $COURSE_COMPAT_DIR), built once and reused: the CUDA builds pip installs are a few GB each,
and they run on a CPU. The notebooks run lax (every cell must run and its asserts hold; outputs
are not compared) in a fresh kernel with a cold Inductor cache each, through
tools/run_notebooks.py. Prints a Markdown table for the README.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# name -> (torch, transformers). The floor is requirements.txt's lower bounds; the pinned reference
# (constraints.txt) is what `make test` runs strictly; the newest is the newest the index serves.
COMBINATIONS = {
    "floor": ("2.8.0", "4.56.2"),
    "newest": ("2.15.0", "5.23.0"),
}


def cache_root() -> Path:
    default = Path.home() / ".cache" / "torch-compile-course" / "compat"
    return Path(os.environ.get("COURSE_COMPAT_DIR", default))


def requirement_files(scratch: Path, torch: str, transformers: str) -> tuple[Path, Path]:
    """requirements.txt without the editable course (PYTHONPATH serves it) and the other pins."""
    requirements = [
        line
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if not line.startswith("-e") and not line.startswith(("torch>", "transformers>"))
    ]
    requirements += [f"torch=={torch}", f"transformers=={transformers}"]
    constraints = [
        line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if not line.startswith(("torch==", "transformers=="))
    ]
    req, con = scratch / "requirements.txt", scratch / "constraints.txt"
    req.write_text("\n".join(requirements) + "\n")
    con.write_text("\n".join(constraints) + "\n")
    return req, con


def ensure_env(torch: str, transformers: str) -> Path:
    """The environment's python, installing it first if it is missing or its inputs changed."""
    env = cache_root() / f"torch-{torch}_transformers-{transformers}"
    python = env / "bin" / "python"
    with tempfile.TemporaryDirectory() as scratch:
        req, con = requirement_files(Path(scratch), torch, transformers)
        digest = hashlib.sha256(req.read_bytes() + con.read_bytes()).hexdigest()
        stamp = env / ".course-installed"
        if stamp.exists() and stamp.read_text() == digest and python.exists():
            return python
        print(f"installing torch {torch} + transformers {transformers} into {env} (a few GB, once)")
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "-r", str(req), "-c", str(con)]
        subprocess.run(pip, check=True)
        subprocess.run([str(python), "-c", "import matplotlib.pyplot"], check=True)  # build the font cache
        stamp.write_text(digest)
    return python


def run_lax(python: Path, prefixes: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("TORCHINDUCTOR_CACHE_DIR", None)
        command = [str(python), str(ROOT / "tools" / "run_notebooks.py"), "--lax", "--json", str(report)]
        subprocess.run(command + prefixes, env=env, check=False)
        if not report.exists():
            return {"label": str(python), "rows": [], "error": "the run did not finish"}
        return json.loads(report.read_text())


def table(results: list[tuple[str, str, str, dict]]) -> tuple[list[str], bool]:
    """The README's compatibility table, and whether every notebook passed everywhere."""
    today = datetime.date.today().isoformat()
    lines = [
        f"Lax run of every notebook, {today}, `make test-compat`:",
        "",
        "| combination | torch | transformers | notebooks passing | first failure |",
        "|---|---|---|---|---|",
    ]
    all_passed = True
    for name, torch, transformers, report in results:
        rows = report.get("rows", [])
        failures = [r for r in rows if r["failure"]]
        all_passed &= bool(rows) and not failures
        first = report.get("error", "-")
        if failures:
            first = f"{failures[0]['notebook']}: {failures[0]['failure']}"
        passing = f"{len(rows) - len(failures)}/{len(rows)}"
        lines.append(f"| {name} | {torch} | {transformers} | {passing} | {first.replace('|', '/')} |")
    return lines, all_passed


def write_readme(lines: list[str]) -> None:
    """Replace the table between the README's compat-table markers."""
    readme = ROOT / "README.md"
    start, end = "<!-- compat-table -->", "<!-- /compat-table -->"
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(start, 1)
    readme.write_text(head + "\n".join([start, *lines, end]) + rest.split(end, 1)[1], encoding="utf-8")
    print("README.md: compatibility table updated")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("prefixes", nargs="*", help="run only notebooks whose names start with these")
    parser.add_argument("--only", choices=sorted(COMBINATIONS), action="append", help="one combination")
    parser.add_argument("--readme", action="store_true", help="write the table into README.md")
    args = parser.parse_args()
    results = []
    for name in args.only or list(COMBINATIONS):
        torch, transformers = COMBINATIONS[name]
        print(f"\n== {name}: torch {torch}, transformers {transformers}", flush=True)
        results.append((name, torch, transformers, run_lax(ensure_env(torch, transformers), args.prefixes)))
    lines, all_passed = table(results)
    print("\n" + "\n".join(lines))
    if args.readme and not (args.prefixes or args.only):
        write_readme(lines)
    return 0 if all_passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
