"""The offline GPU run kit: every notebook lax on a CUDA GPU, on a machine with no package index.

    python tools/gpu_kit.py fetch                      # here: the wheels the GPU machine lacks, into .whl/
    python3 tools/gpu_kit.py run --out DIR --part 1    # there: install, then notebooks 01 04 08 09 07 02
    python3 tools/gpu_kit.py run --out DIR --part 2    # there: the others (03 05 06 10 11 12 13)
    python3 tools/gpu_kit.py run --out DIR --profile t4 07 09   # the T4's branches on the GPU at hand
    python3 tools/gpu_kit.py run --out DIR --parallel 4    # all, four at a time (run times under load)
    python tools/gpu_kit.py readme DIR [DIR ...]       # here: the README's device table from the runs

The GPU machine is expected to have Python 3.12 with torch (CUDA), triton, transformers, matplotlib,
pytest and psutil. ``run`` installs the wheels in ``.whl/`` (nbclient, nbformat, nbval, ipykernel,
tlparse and what they need, skipping any distribution already installed there) into a folder on
``PYTHONPATH``, installs the course with ``--no-deps``, and runs each notebook with
``tools/run_notebooks.py --lax`` in its own process, under a time cap, the ones a reading predicted
to fail first. It writes ``results.json`` and the executed notebooks (``executed.tar.gz``) to
``--out``: the device table and the GPU figures are made from them, here.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".whl"
#: What the GPU machine lacks, pinned as in constraints.txt; pip adds what these need.
KIT_PACKAGES = ("nbclient", "nbformat", "nbval", "ipykernel", "ipython", "tlparse")
#: The wheels' target: CPython 3.12 on x86-64 Linux (the GPU machine's Python).
PLATFORM_ARGS = (
    "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
    *(arg for tag in ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64",
                      "manylinux_2_26_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
                      "manylinux_2_34_x86_64", "manylinux_2_35_x86_64", "manylinux1_x86_64")
      for arg in ("--platform", tag)),
)  # fmt: skip
#: Part 1: the notebooks a reading of their GPU branches predicted to fail or to be at risk.
PARTS = {"1": ("01", "04", "08", "09", "07", "02"), "2": ("03", "05", "06", "10", "11", "12", "13")}
#: Seconds one notebook may run before it is stopped (and reported as stopped).
CAPS = {"02": 330, "09": 300, "11": 300}
DEFAULT_CAP = 240
#: The slowest first, so that notebooks run side by side (--parallel) finish close together: the
#: order of the H200 runs of 2026-11-27 (02, 11 and 05 stopped at their caps there), 13 (never run
#: there, 10 s on a CPU) last.
LONGEST_FIRST = ("02", "11", "05", "09", "10", "07", "12", "01", "08", "03", "04", "06", "13")
#: No notebook is started with less than this left of the run's budget.
MIN_START_S = 30
#: Seconds past its cap before a notebook's runner is killed (it normally stops itself at the cap).
BACKSTOP_S = 20


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            pins[match[1].lower()] = match[2]
    return pins


def fetch(dest: Path) -> int:
    """Download the kit's wheels (with their dependencies) for the GPU machine into ``dest``."""
    pins = _pins()
    wanted = [f"{name}=={pins[name]}" if name in pins else name for name in KIT_PACKAGES]
    dest.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", *PLATFORM_ARGS, "-d", str(dest), *wanted]
    print(" ".join(command), flush=True)
    done = subprocess.run(command)
    size = sum(f.stat().st_size for f in dest.glob("*.whl")) / 1e6
    print(f"{len(list(dest.glob('*.whl')))} wheels, {size:.1f} MB in {dest}")
    return done.returncode


def _wheel_distribution(wheel: Path) -> str:
    return wheel.name.split("-", 1)[0].replace("_", "-").lower()


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def install(site: Path) -> bool:
    """Install the missing wheels and the course (no dependencies) into ``site``; False if the
    course could not be built there (no setuptools): then it is imported from the checkout."""
    missing = [w for w in sorted(WHEELS.glob("*.whl")) if not _installed(_wheel_distribution(w))]
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    pip += ["--disable-pip-version-check", "--target", str(site)]
    if missing:
        print(f"installing {len(missing)} wheels: " + ", ".join(_wheel_distribution(w) for w in missing))
        subprocess.run([*pip, *map(str, missing)], check=True)
    course = subprocess.run([*pip, "--no-build-isolation", str(ROOT)], cwd=tempfile.gettempdir())
    if course.returncode:
        print("the course could not be installed (see above): importing it from the checkout instead")
    return course.returncode == 0


def _run_one(prefix: str, work: Path, env: dict[str, str], cap: float) -> dict:
    """One notebook, lax, in its own process (and process group), stopped after ``cap`` seconds."""
    result = work / f"{prefix}.json"
    command = [sys.executable, str(ROOT / "tools" / "run_notebooks.py"), "--lax", "--json", str(result)]
    command += ["--save-dir", str(work / "executed"), "--cap", str(cap), prefix]
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:  # the runner stops at the cap itself and keeps what ran; this is the backstop
        process.wait(timeout=cap + BACKSTOP_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return {"notebook": prefix, "seconds": round(time.perf_counter() - start, 1),
                "failure": f"stopped at its cap of {cap:.0f} s", "skipped": 0}  # fmt: skip
    if not result.exists():
        return {"notebook": prefix, "seconds": round(time.perf_counter() - start, 1),
                "failure": f"the runner exited with {process.returncode}", "skipped": 0}  # fmt: skip
    return json.loads(result.read_text())["rows"][0]


def run(
    out: Path,
    prefixes: list[str],
    profile: str | None,
    budget: float,
    parallel: int = 1,
    cap: float | None = None,
) -> int:
    """Install, then run ``prefixes`` lax on CUDA within ``budget`` seconds, ``parallel`` at a time
    (each with its share of the CPUs for compiling, and at most ``cap`` seconds, default CAPS);
    write results.json."""
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    site = Path(tempfile.mkdtemp(prefix="course-site-"))
    installed = install(site)
    env = dict(os.environ, COURSE_DEVICE="cuda", PYTHONUNBUFFERED="1")
    paths = [str(site), None if installed else str(ROOT), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    env["PATH"] = os.pathsep.join([str(site / "bin"), env["PATH"]])  # tlparse's executable
    env.pop("COURSE_GPU_PROFILE", None)
    if parallel > 1:  # Inductor's compile workers default to one per CPU in every notebook
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(max(4, (os.cpu_count() or 1) // parallel))
    if profile:
        env["COURSE_GPU_PROFILE"] = profile
    probe = (
        "import torch, transformers, triton, sys; print(torch.cuda.get_device_name(), "
        "torch.cuda.get_device_capability(), 'torch', torch.__version__, 'transformers', "
        "transformers.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
    )
    facts = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    machine = facts.stdout.strip() or f"probe failed: {facts.stderr.strip()[-300:]}"
    print(machine, flush=True)
    cpu_compile = _time_cpu_compile(env)
    print(f"idle, before the notebooks: {cpu_compile}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="course-gpu-run-"))  # $OUT takes few files: only two go there
    queue = list(prefixes) if parallel == 1 else sorted(prefixes, key=_longest_first)
    found: dict[str, dict] = {}
    lock = threading.Lock()

    def lane() -> None:
        while True:
            with lock:
                if not queue:
                    return
                prefix = queue.pop(0)
            left = budget - (time.perf_counter() - start)
            if left < MIN_START_S:
                found[prefix] = {"notebook": prefix, "seconds": 0, "failure": "not run: out of time"}
                found[prefix]["skipped"] = 0
                continue
            its_cap = min(cap or CAPS.get(prefix, DEFAULT_CAP), left - BACKSTOP_S)
            print(f"--- {prefix} (cap {its_cap:.0f} s)", flush=True)
            found[prefix] = row = _run_one(prefix, work, env, its_cap)
            print(f"--- {prefix}: {row['failure'] or 'passed'} in {row['seconds']:.0f} s", flush=True)

    lanes = [threading.Thread(target=lane) for _ in range(parallel)]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join()
    rows = [found[prefix] for prefix in prefixes]
    results = {"machine": machine, "profile": profile, "cpus": os.cpu_count(), "parallel": parallel}
    results["cpu_compile"] = cpu_compile
    results["rows"] = rows
    (out / "results.json").write_text(json.dumps(results, indent=1))
    executed = work / "executed"
    if executed.is_dir():
        with tarfile.open(out / "executed.tar.gz", "w:gz") as archive:
            archive.add(executed, arcname="executed")
    for row in rows:
        print(f"| {row['notebook']} | {row['failure'] or 'passed'} | {row['seconds']:.0f} s |")
    return 1 if any(r["failure"] for r in rows) else 0


#: Times, in a fresh process with its own cold Inductor cache: importing torch, then two small
#: functions compiled for CPU tensors (the first pays the one-time costs of building C++).
CPU_COMPILE_PROBE = """
import time
t = time.perf_counter(); import torch; imported = time.perf_counter() - t
x = torch.randn(64)
t = time.perf_counter(); torch.compile(lambda v: v.sin() + 1)(x); first = time.perf_counter() - t
t = time.perf_counter(); torch.compile(lambda v: v.cos() * 2)(x); second = time.perf_counter() - t
print(f"import torch {imported:.1f} s; first CPU compile {first:.1f} s, second {second:.1f} s")
"""


def _time_cpu_compile(env: dict[str, str], timeout: float = 150) -> str:
    """How long compiling for the CPU takes on this machine, idle (a line; see CPU_COMPILE_PROBE)."""
    with tempfile.TemporaryDirectory() as cache:
        probe_env = dict(env, TORCHINDUCTOR_CACHE_DIR=cache)
        try:
            done = subprocess.run([sys.executable, "-c", CPU_COMPILE_PROBE], env=probe_env,
                                  capture_output=True, text=True, timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired:
            return f"the CPU compile probe did not finish in {timeout:.0f} s"
    return done.stdout.strip() or f"the CPU compile probe failed: {done.stderr.strip()[-200:]}"


def _longest_first(prefix: str) -> int:
    return LONGEST_FIRST.index(prefix) if prefix in LONGEST_FIRST else len(LONGEST_FIRST)


#: Output lines that hold the GPU figures the README quotes: a line holding one of these (or the
#: whole markdown table that starts with one).
FIGURES = {
    "01": ("first compiled call", "compiled runs at"),
    "02": ("| variant | median ms",),
    "06": ("| blocks | whole model",),
    "09": ("| variant | recipe | tokens/s", "best recipe:"),
    "12": ("own fresh cache: trivial function",),  # the first C++ compile for CPU tensors there
}


def figures(notebook: Path) -> list[str]:
    """The figure lines of one executed notebook (see FIGURES), in the order they were printed."""
    import nbformat

    markers = FIGURES.get(notebook.name[:2], ())
    found = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            table = output.get("data", {}).get("text/markdown", "")
            if any(table.startswith(marker) for marker in markers):
                found.append(table.strip())
            text = "".join(output.get("text", ""))
            found += [line.strip() for line in text.splitlines() if any(m in line for m in markers)]
    return found


def device_table(runs: list[Path]) -> str:
    """Markdown: each run's machine, its notebooks' results and the figures they printed."""
    parts = []
    for folder in runs:
        results = json.loads((folder / "results.json").read_text())
        profile = (
            f", device queries answering as a {results['profile'].upper()}" if results["profile"] else ""
        )
        at_once = results.get("parallel", 1)
        load = f"; {at_once} notebooks ran at a time, so run times and timed figures are under that load"
        load = load if at_once > 1 else ""
        parts += [f"**{folder.name}**: {results['machine']}, {results['cpus']} CPUs{profile}{load}.", ""]
        if results.get("cpu_compile"):
            parts += [f"Before the notebooks, idle: {results['cpu_compile']}.", ""]
        parts += ["| notebook | result | run time |", "|---|---|---|"]
        for row in results["rows"]:
            result = (row["failure"] or "passed").splitlines()[0][:110].replace("|", "\\|")
            parts.append(f"| {row['notebook'][:2]} | {result} | {row['seconds']:.0f} s |")
        with tempfile.TemporaryDirectory() as scratch:
            archive = folder / "executed.tar.gz"
            if archive.exists():
                with tarfile.open(archive) as tar:
                    tar.extractall(scratch, filter="data")
            for notebook in sorted(Path(scratch).glob("executed/*.ipynb")):
                lines = figures(notebook)
                if lines:
                    parts += ["", f"{notebook.name[:2]}, as printed:", "", "```", *lines, "```"]
        parts.append("")
    return "\n".join(parts).strip()


def _run_sections(block: str) -> dict[str, str]:
    """The device table's sections, by run name (each starts with a line ``**NAME**: ...``)."""
    parts = re.split(r"^(?=\*\*[^*\s]+\*\*: )", block.strip(), flags=re.MULTILINE)
    return {part.split("**")[1]: part.strip() for part in parts if part.startswith("**")}


def write_readme(runs: list[Path]) -> None:
    """Put :func:`device_table` of ``runs`` between the README's device-table markers: a run's
    section replaces the one of the same name, a new run's goes last, and the others stay (their
    run folders are not kept)."""
    readme = ROOT / "README.md"
    start, end = "<!-- device-table -->", "<!-- /device-table -->"
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(start, 1)
    block, tail = rest.split(end, 1)
    sections = _run_sections(block)
    sections.update(_run_sections(device_table(runs)))
    table = "\n\n".join(sections.values())
    readme.write_text(f"{head}{start}\n{table}\n{end}{tail}", encoding="utf-8")
    print("README.md: device table written from " + ", ".join(str(r) for r in runs))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    verbs = parser.add_subparsers(dest="verb", required=True)
    fetch_args = verbs.add_parser("fetch", help="download the wheels (here, with a package index)")
    fetch_args.add_argument("--dest", type=Path, default=WHEELS)
    run_args = verbs.add_parser("run", help="install and run notebooks lax on CUDA (there)")
    run_args.add_argument("prefixes", nargs="*", help="notebooks to run, in this order (default: --part)")
    run_args.add_argument("--part", choices=[*PARTS, "all"], default="all")
    run_args.add_argument("--out", type=Path, required=True, help="folder for results.json and the notebooks")
    run_args.add_argument(
        "--profile", choices=["t4"], help="answer the course's device queries like this GPU"
    )
    run_args.add_argument("--budget", type=float, default=530, help="seconds for the whole run (default 530)")
    run_args.add_argument("--parallel", type=int, default=1, help="notebooks at a time (default 1)")
    run_args.add_argument("--cap", type=float, help="seconds each notebook may run (default: CAPS)")
    readme_args = verbs.add_parser("readme", help="write the README's device table from run folders (here)")
    readme_args.add_argument("runs", nargs="+", type=Path, help="folders holding results.json")
    args = parser.parse_args()
    if args.verb == "fetch":
        return fetch(args.dest)
    if args.verb == "readme":
        write_readme(args.runs)
        return 0
    prefixes = args.prefixes or [p for part in PARTS for p in PARTS[part] if args.part in (part, "all")]
    if args.parallel < 1:
        parser.error(f"--parallel takes a count of at least 1, not {args.parallel}")
    if args.cap is not None and args.cap <= 0:
        parser.error(f"--cap takes a number of seconds above 0, not {args.cap:g}")
    return run(args.out, prefixes, args.profile, args.budget, args.parallel, args.cap)


if __name__ == "__main__":
    raise SystemExit(main())
