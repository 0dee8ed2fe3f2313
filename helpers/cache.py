"""Measure compile-time caching honestly: each start in a fresh process with its own cache.

A process that has compiled something keeps it in memory, so timing a "warm start" inside
it would lie. ``run_compile_in_fresh_process`` runs a script in a new Python process whose
``TORCHINDUCTOR_CACHE_DIR`` is the directory you give (the FX graph cache, the AOTAutograd
cache and the compiled C++ kernels all live there) and returns the result the script
reported with ``emit_result`` (a child counts its cache hits and misses with
``helpers.counters.CompileCounts``, the course's one counter vocabulary, and reports
``counts.as_dict()``). ``compile_phases`` splits a first call's compile time into Dynamo,
AOTAutograd, Inductor and the kernel compiler; ``describe_cache_dir`` says what a cache
directory holds; ``child_env`` is the environment of every child process the helpers start.
``interleaved_starts`` repeats several kinds of start in rotating order (for a median and a spread;
a start allowed to crash is left out, not raised), and ``size_on_disk`` measures what a start
needs shipped (a file or a directory).

This module imports only the standard library, so a child that does not compile starts fast.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The prefix of the one stdout line that carries the child's result as JSON.
RESULT_PREFIX = "@@course-result@@ "

#: Environment variables a child does not inherit: they would let a "cold" start borrow compiled
#: code from elsewhere (Triton's own cache directory, a remote cache) or switch caches off or on,
#: so that its hits, misses and times would depend on the machine it runs on; a job id or a cache
#: key tag changes the keys themselves, and the PGO variables let a child read profiles of earlier
#: runs. The names are read by torch/_inductor/config.py, torch/_functorch/config.py and
#: torch/compiler/config.py (torch 2.8 to 2.15; TORCH_COMPILE_FORCE_DISABLE_CACHES and the
#: sticky-PGO read/write names from 2.9). Pass one in ``env`` to set it on purpose.
CACHE_ENV_VARS = (
    "TRITON_CACHE_DIR",
    "TORCHINDUCTOR_FX_GRAPH_CACHE",
    "TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT",
    "TORCHINDUCTOR_AUTOGRAD_CACHE",
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
    "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE",
    "TORCHINDUCTOR_REDIS_HOST",
    "TORCHINDUCTOR_REDIS_PORT",
    "TORCHINDUCTOR_REDIS_URL",
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "TORCH_COMPILE_FORCE_DISABLE_CACHES",
    "TORCHINDUCTOR_BUNDLE_TRITON_INTO_FX_GRAPH_CACHE",
    "TORCH_COMPILE_CACHE_KEY_TAG",
    "TORCH_COMPILE_JOB_ID",
    "TORCH_COMPILE_STICKY_PGO_KEY",
    "TORCH_COMPILE_STICKY_PGO_READ",
    "TORCH_COMPILE_STICKY_PGO_WRITE",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO",
)


def emit_result(result: Mapping[str, Any]) -> None:
    """Print ``result`` as the one JSON line :func:`run_compile_in_fresh_process` returns.

    Call it once, at the end of the child script. Values must be JSON-serializable.

    Example:
        >>> emit_result({"answer": 42})
        @@course-result@@ {"answer": 42}
    """
    if not isinstance(result, Mapping):
        raise ValueError(f"result must be a mapping (e.g. a dict); got {type(result).__name__}")
    print(RESULT_PREFIX + json.dumps(dict(result)), flush=True)


def parse_result(stdout: str) -> dict[str, Any]:
    """The result a child printed with :func:`emit_result` (its last such line).

    Example:
        >>> parse_result('noise\\n@@course-result@@ {"hits": 2}\\n')
        {'hits': 2}
    """
    if not isinstance(stdout, str):
        raise TypeError(f"stdout must be the child's standard output as a str; got {type(stdout).__name__}")
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise ValueError("stdout holds no result line: did the child call emit_result(...)?")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def child_env(env: Mapping[str, str] | None = None, *, drop: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a child Python process: this one, less ``drop``, plus ``env``, with the
    ``helpers`` package importable (its folder first on ``PYTHONPATH``).

    Used for every process the helpers start (fresh-process compiles, the DDP launcher).

    Example:
        >>> child = child_env({"OMP_NUM_THREADS": "1"}, drop=["TRITON_CACHE_DIR"])
        >>> child["OMP_NUM_THREADS"], "TRITON_CACHE_DIR" in child
        ('1', False)
    """
    if env is not None and not (
        isinstance(env, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ValueError("env must be a mapping of str -> str (environment variables)")
    if isinstance(drop, str) or not all(isinstance(name, str) for name in drop):
        raise ValueError(f"drop must be an iterable of variable names (not one str); got {drop!r}")
    dropped = set(drop)
    child = {name: value for name, value in os.environ.items() if name not in dropped}
    child.update(env or {})
    package_root = str(Path(__file__).resolve().parent.parent)
    child["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, child.get("PYTHONPATH", "")) if p)
    return child


class ChildCrashed(RuntimeError):
    """A child of :func:`run_compile_in_fresh_process` was killed by a signal (a crash in C or C++
    code, such as a segmentation fault, rather than a Python error).

    ``signal_name`` names the signal; the message ends with the Python stack that faulthandler
    printed, where the crash happened (Python's own lines about extension modules left out).

    Example:
        >>> crash = ChildCrashed(11, "Fatal Python error: Segmentation fault")
        >>> crash.signal_name
        'SIGSEGV'
        >>> print(crash)
        the child process was killed by SIGSEGV (signal 11), in:
        Fatal Python error: Segmentation fault
    """

    def __init__(self, signal_number: int, stderr: str) -> None:
        try:
            self.signal_name = signal.Signals(signal_number).name
        except ValueError:
            self.signal_name = f"signal {signal_number}"
        lines = [line for line in stderr.strip().splitlines() if not line.startswith("Extension modules:")]
        where = "\n".join(lines[-25:])
        super().__init__(
            f"the child process was killed by {self.signal_name} (signal {signal_number})"
            + (f", in:\n{where}" if where else "")
        )


def run_compile_in_fresh_process(
    script: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str],
    args: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Run a Python script in a new process and return the result it emitted.

    ``script`` is a path to a ``.py`` file, or the script's source as a ``str``. The child
    runs with ``sys.executable``, ``TORCHINDUCTOR_CACHE_DIR=cache_dir`` (an existing
    directory) and the ``helpers`` package importable. It inherits this process's environment
    except :data:`CACHE_ENV_VARS`, so a cold start is cold on every machine. ``args`` reaches it
    as JSON in ``sys.argv[1]`` (``{}`` if not given); ``env`` adds or overrides environment
    variables (those of :data:`CACHE_ENV_VARS` included).
    The child must call :func:`emit_result` once. The returned dict is that result plus
    ``"process_s"``, the child's wall-clock time from launch to exit. Its stdout and stderr
    are captured, and shown only if it fails: a ``RuntimeError`` with the end of its stderr, or
    :class:`ChildCrashed` if a signal killed it (the child runs with ``PYTHONFAULTHANDLER=1``,
    so the error holds the Python stack it crashed in).

    Example:
        >>> import tempfile
        >>> child = "import sys, json; from helpers.cache import emit_result; "
        >>> child += "emit_result({'doubled': 2 * json.loads(sys.argv[1])['n']})"
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     result = run_compile_in_fresh_process(child, cache_dir=folder, args={"n": 21})
        >>> result["doubled"], result["process_s"] > 0
        (42, True)
    """
    if isinstance(script, os.PathLike):
        if not Path(script).is_file():
            raise ValueError(f"script must be an existing file or the source as a str; got {script!r}")
        code = Path(script).read_text(encoding="utf-8")
    elif isinstance(script, str) and script.strip():
        code = script
    else:
        raise ValueError("script must be a path (pathlib.Path) to a .py file or its non-empty source (str)")
    if not isinstance(cache_dir, (str, os.PathLike)) or not Path(cache_dir).is_dir():
        raise ValueError(f"cache_dir must be an existing directory; got {cache_dir!r}")
    if args is not None and not isinstance(args, Mapping):
        raise ValueError(f"args must be a mapping of JSON-serializable values; got {type(args).__name__}")
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds; got {timeout_s!r}")

    environment = child_env(
        {"PYTHONFAULTHANDLER": "1", **(env or {}), "TORCHINDUCTOR_CACHE_DIR": str(Path(cache_dir).resolve())},
        drop=CACHE_ENV_VARS,
    )
    with tempfile.TemporaryDirectory(prefix="course-child-") as folder:
        child = Path(folder) / "child.py"
        child.write_text(code, encoding="utf-8")
        start = time.perf_counter()
        completed = subprocess.run(
            [sys.executable, str(child), json.dumps(dict(args or {}))],
            capture_output=True,
            text=True,
            env=environment,
            cwd=folder,
            timeout=timeout_s,
        )
        process_s = time.perf_counter() - start
    if completed.returncode < 0:
        raise ChildCrashed(-completed.returncode, completed.stderr)
    if completed.returncode != 0:
        tail = "\n".join(completed.stderr.strip().splitlines()[-25:])
        raise RuntimeError(f"the child process exited with code {completed.returncode}:\n{tail}")
    try:
        result = parse_result(completed.stdout)
    except ValueError as error:
        raise RuntimeError(f"{error}\nchild stdout (end):\n{completed.stdout[-2000:]}") from None
    result["process_s"] = process_s
    return result


#: The phases of a first call, in the order they run (see :func:`compile_phases`).
PHASES = {
    "dynamo_s": "Dynamo: trace bytecode, build guards",
    "aot_autograd_s": "AOTAutograd (and cache lookups)",
    "inductor_s": "Inductor: lower, fuse, generate code",
    "kernel_compile_s": "waiting for the kernel compiler",
}


def compile_phases(records: Sequence[Any]) -> dict[str, float]:
    """Seconds spent in each compiler phase, summed over Dynamo's compilation records.

    ``records`` are entries of ``torch._dynamo.utils.get_compilation_metrics()`` (one per
    frame Dynamo compiled). The phases nest: the whole frame compile contains the backend
    (AOTAutograd), which contains Inductor, which ends by waiting for the C++ (CPU) or
    Triton (GPU) compiler to finish the kernels it started in parallel. On a cache hit
    Inductor does not run and the backend time is the cache lookup (plus rebuilding any
    kernel the cache did not hold). Keys: those of :data:`PHASES` and ``"total_s"``.

    Example:
        >>> from types import SimpleNamespace
        >>> record = SimpleNamespace(entire_frame_compile_time_s=10.0, backend_compile_time_s=8.0,
        ...                          inductor_compile_time_s=7.0, triton_compile_time_us=4_000_000)
        >>> compile_phases([record])
        {'dynamo_s': 2.0, 'aot_autograd_s': 1.0, 'inductor_s': 3.0, 'kernel_compile_s': 4.0, 'total_s': 10.0}
    """
    if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
        raise ValueError("records must be a sequence of torch._dynamo.utils.CompilationMetrics")
    phases = dict.fromkeys([*PHASES, "total_s"], 0.0)
    for record in records:
        total = getattr(record, "entire_frame_compile_time_s", None) or 0.0
        backend = getattr(record, "backend_compile_time_s", None) or 0.0
        inductor = getattr(record, "inductor_compile_time_s", None) or 0.0
        kernels = (getattr(record, "triton_compile_time_us", None) or 0) / 1e6
        phases["dynamo_s"] += max(total - backend, 0.0)
        if inductor:
            phases["aot_autograd_s"] += max(backend - inductor, 0.0)
            phases["inductor_s"] += max(inductor - kernels, 0.0)
        else:  # a cache hit: no Inductor, but kernels the cache lacks are still compiled
            phases["aot_autograd_s"] += max(backend - kernels, 0.0)
        phases["kernel_compile_s"] += kernels
        phases["total_s"] += total
    return {name: round(value, 6) for name, value in phases.items()}


@dataclass(frozen=True)
class CacheDirSummary:
    """What an Inductor cache directory holds (see :func:`describe_cache_dir`).

    Example:
        >>> CacheDirSummary(fxgraph_entries=1, aotautograd_entries=1, compiled_kernels=3,
        ...                 megabytes=1.5).fxgraph_entries
        1
    """

    fxgraph_entries: int
    aotautograd_entries: int
    compiled_kernels: int
    megabytes: float

    def __str__(self) -> str:
        return (
            f"{self.fxgraph_entries} FX graph entries, {self.aotautograd_entries} AOTAutograd entries, "
            f"{self.compiled_kernels} compiled kernel libraries (.so/.pyd), {self.megabytes:.1f} MB"
        )


def describe_cache_dir(cache_dir: str | os.PathLike[str]) -> CacheDirSummary:
    """Count the cache entries and compiled kernel libraries under an Inductor cache directory.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     print(describe_cache_dir(folder))
        0 FX graph entries, 0 AOTAutograd entries, 0 compiled kernel libraries (.so/.pyd), 0.0 MB
    """
    if not isinstance(cache_dir, (str, os.PathLike)) or not Path(cache_dir).is_dir():
        raise ValueError(f"cache_dir must be an existing directory; got {cache_dir!r}")
    root = Path(cache_dir)
    files = [p for p in root.rglob("*") if p.is_file()]

    def entries(section: str) -> int:
        return sum(1 for p in files if p.relative_to(root).parts[0] == section)

    kernels = sum(1 for p in files if p.suffix in (".so", ".pyd"))
    size = sum(p.stat().st_size for p in files)
    return CacheDirSummary(
        fxgraph_entries=entries("fxgraph"),
        aotautograd_entries=entries("aotautograd"),
        compiled_kernels=kernels,
        megabytes=size / 1e6,
    )


def size_on_disk(path: str | os.PathLike[str]) -> int:
    """Bytes a file takes, or all the files under a directory: the size of what you ship.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     _ = (Path(folder) / "a.bin").write_bytes(b"1234")
        ...     size_on_disk(folder), size_on_disk(Path(folder) / "a.bin")
        (4, 4)
    """
    if not isinstance(path, (str, os.PathLike)) or not Path(path).exists():
        raise ValueError(f"path must be an existing file or directory; got {path!r}")
    root = Path(path)
    if root.is_file():
        return root.stat().st_size
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def interleaved_starts(
    starts: Mapping[str, Any], *, rounds: int = 3, may_crash: Collection[str] = ()
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, ChildCrashed]]:
    """Run every start ``rounds`` times, interleaved; collect what each returned, and which crashed.

    ``starts`` maps a name to a zero-argument callable that runs one start (typically
    :func:`run_compile_in_fresh_process` with a cache directory of its own) and returns its
    result dict. Round ``r`` begins at the ``r``-th name (A B C, B C A, C A B, ...), so a
    machine that gets busier slows every method alike, and no method always runs first.
    A start named in ``may_crash`` whose process is killed by a signal (:class:`ChildCrashed`)
    is left out of the later rounds and of the results, and returned second with its crash;
    any other crash is raised.

    Example:
        >>> order = []
        >>> def start(name):
        ...     return lambda: order.append(name) or {"name": name}
        >>> results, crashed = interleaved_starts({"a": start("a"), "b": start("b")}, rounds=2)
        >>> order, [r["name"] for r in results["b"]], crashed
        (['a', 'b', 'b', 'a'], ['b', 'b'], {})
    """
    if not isinstance(starts, Mapping) or not starts or not all(callable(s) for s in starts.values()):
        raise ValueError("starts must be a non-empty mapping of name -> zero-argument callable")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"rounds must be a positive int; got {rounds!r}")
    if isinstance(may_crash, str) or not all(name in starts for name in may_crash):
        raise ValueError(f"may_crash must be a collection of names of starts; got {may_crash!r}")
    names = list(starts)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    crashed: dict[str, ChildCrashed] = {}
    for round_index in range(rounds):
        first = round_index % len(names)
        for name in names[first:] + names[:first]:
            if name in crashed:
                continue
            try:
                result = starts[name]()
            except ChildCrashed as crash:
                if name not in may_crash:
                    raise
                crashed[name] = crash
                del results[name]
                continue
            if not isinstance(result, Mapping):
                raise TypeError(f"the start {name!r} must return a dict; got {type(result).__name__}")
            results[name].append(dict(result))
    return results, crashed
