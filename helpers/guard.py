"""The platform guard: may ``torch.compile`` run here, and if not, why not.

Everything is read when a function is called, never at import, so that tests can
simulate another platform by patching ``torch.__version__``, ``sys.platform``,
``sys.version_info`` and environment variables. Nothing here calls a CUDA API
that raises on a CPU-only build of torch.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from packaging.version import InvalidVersion, Version

from helpers.device import cuda_capability, normalize_device

#: Set this environment variable to 1 to run every notebook eagerly (the escape hatch).
DISABLE_ENV_VAR = "COURSE_DISABLE_COMPILE"

#: Set this to cpu, cuda or mps to choose the notebooks' device (the strict test run sets cpu).
DEVICE_ENV_VAR = "COURSE_DEVICE"

#: The oldest torch release the course is tested on (see requirements.txt for why).
MIN_TORCH = "2.8"

#: The oldest torch whose Inductor runs the course's models on an Apple GPU (MPS): see
#: :data:`MPS_FLOOR_REASON`. Below it the guard declines Inductor on MPS (Dynamo still runs).
MIN_TORCH_MPS = "2.13"

#: Why the MPS floor is higher than the course's, read in the Metal code generator
#: (``torch/_inductor/codegen/mps.py``) of torch 2.8, 2.9, 2.10, 2.11, 2.13 and 2.15 (2.12 is not on
#: the index). A reduction over a dimension whose size is dynamic (``dynamic=True``, or a size
#: Dynamo made dynamic after a recompile) cannot be generated before 2.13: 2.8 computes
#: ``min(symbolic size, 1024)`` and raises; 2.9-2.11 declare a threadgroup array of that symbolic
#: size, which Metal rejects (it needs a constant). 2.13 allocates the static upper bound.
MPS_FLOOR_REASON = (
    "its Metal code generator cannot build a reduction over a dimension of dynamic size "
    "(what dynamic=True and automatic dynamic shapes give, notebook 04); torch 2.13 can"
)

#: A code cell whose first lines hold this comment runs only where Inductor can build kernels.
REQUIRES_INDUCTOR_MARK = "# requires: inductor"
#: ... and this one only where Inductor can build kernels for the CPU, whatever the notebook's device
#: (a cell that compiles CPU tensors on a GPU machine needs a C++ compiler there too).
REQUIRES_INDUCTOR_CPU_MARK = "# requires: inductor-cpu"

#: Backends that generate code (and so need a C++ compiler or Triton).
CODEGEN_BACKENDS = ("inductor",)

# Newest Python that Dynamo supports, by the first torch release that supports it
# (from the torch release notes). Newer torch releases are asked directly.
_NEWEST_PYTHON_BY_TORCH = (
    (Version("2.0"), (3, 10)),
    (Version("2.1"), (3, 11)),
    (Version("2.4"), (3, 12)),
    (Version("2.6"), (3, 13)),
    (Version("2.10"), (3, 14)),
)

_T = TypeVar("_T")


class CompileSkippedWarning(UserWarning):
    """Warned once by :func:`maybe_compile` when it returns the object uncompiled."""


@dataclass(frozen=True)
class CompileSupport:
    """The guard's verdict: ``ok`` and a ``reason`` a learner can act on.

    Example:
        >>> verdict = CompileSupport(ok=False, reason="No C++ compiler.", device="cpu")
        >>> bool(verdict), verdict.reason
        (False, 'No C++ compiler.')
    """

    ok: bool
    reason: str
    device: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        verdict = "compile" if self.ok else "run eagerly"
        return f"[{self.device}] {verdict}: {self.reason}"


def torch_version() -> Version:
    """The installed torch release, parsed, with pre-release and local tags dropped.

    ``"2.13.0+cpu"`` and the NGC-style ``"2.6.0a0+ecf3bae"`` become ``Version("2.13.0")`` and
    ``Version("2.6.0")``. The course compares *base* versions on purpose: packaging (PEP 440)
    orders ``2.6.0a0`` before ``2.6.0``, which is right for release order, but a pre-release
    build from the 2.6 branch already has 2.6's features, and GPU containers ship exactly
    such builds. (``torch.__version__`` itself is a ``TorchVersion``, a ``str`` subclass that
    compares as a version, pre-release rules included: ``"2.6.0a0+git" >= "2.6"`` is False.)

    Example:
        >>> torch_version() >= Version("2.0")
        True
    """
    return parse_version(str(torch.__version__))


def parse_version(version: str) -> Version:
    """Parse a version string by the course's rule: the base version (no pre-release, no local tag).

    Raises ``ValueError`` naming the argument when ``version`` is not a version string.

    Example:
        >>> parse_version("2.6.0a0+ecf3bae"), parse_version("10.0")
        (<Version('2.6.0')>, <Version('10.0')>)
    """
    try:
        return Version(Version(str(version)).base_version)
    except InvalidVersion as error:
        raise ValueError(f"version must be a version string such as '2.13.0+cpu'; got {version!r}") from error


def _compile_disabled_by_env() -> bool:
    return os.environ.get(DISABLE_ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def _python_problem(version: Version) -> str | None:
    python = tuple(sys.version_info[:2])
    # Torch knows its own limits (a newest Python, a free-threaded build before 3.13.3): ask it
    # first, on every release that has the check (2.8 does); the table below names the way out.
    try:
        from torch._dynamo.eval_frame import check_if_dynamo_supported
    except ImportError:
        check_if_dynamo_supported = None
    if check_if_dynamo_supported is not None:
        try:
            check_if_dynamo_supported()
        except RuntimeError as error:
            return f"Dynamo cannot run on this Python ({error})."
        if version >= _NEWEST_PYTHON_BY_TORCH[-1][0]:
            return None
    newest = max(py for first, py in _NEWEST_PYTHON_BY_TORCH if version >= first)
    if python > newest:
        return (
            f"torch {version} cannot compile on Python {python[0]}.{python[1]}: its Dynamo "
            f"supports Python up to {newest[0]}.{newest[1]}. Upgrade torch or use an older Python."
        )
    return None


def _inductor_cxx_candidates(windows: bool) -> list[str]:
    # The names Inductor itself tries (torch._inductor.cpp_builder.get_cpp_compiler): on Windows
    # $CXX or cl; elsewhere torch._inductor.config.cpp.cxx, which holds $CXX as it was when torch
    # imported Inductor's config, else g++ (clang++ on macOS). `None` there means "download gcc
    # with conda", which Inductor only does when asked to.
    if windows:
        return [os.environ.get("CXX", "cl")]
    from torch._inductor import config as inductor_config

    configured = inductor_config.cpp.cxx
    names = list(configured) if isinstance(configured, (list, tuple)) else [configured]
    return [name for name in names if name]


def _python_include_dirs(windows: bool) -> list[str]:
    """Where Inductor's C++ builds look for ``Python.h`` (its CPU kernels are Python extension
    modules): ``torch._inductor.cpp_builder._get_python_include_dirs`` and
    ``_get_python_related_args`` in torch 2.8 to 2.15, read again here so that nothing of Inductor's
    is imported. sysconfig's include path (a framework's Headers folder on a Mac where that path is
    missing), then the posix_prefix scheme's (nt on Windows)."""
    include = Path(sysconfig.get_path("include"))
    if not include.exists() and sys.platform == "darwin":
        include = (Path(sysconfig.get_path("stdlib")).parent.parent / "Headers").absolute()
    dirs = [str(include)]
    scheme_include = sysconfig.get_path("include", scheme="nt" if windows else "posix_prefix")
    if scheme_include and scheme_include not in dirs:
        dirs.append(scheme_include)
    return dirs


_PROBE_SOURCE = "#include <Python.h>\nint course_probe(int x) { return x + 1; }\n"
_probe_results: dict[tuple[str, int, tuple[str, ...]], str | None] = {}


def _probe_cxx(path: str, windows: bool, include_dirs: list[str]) -> str | None:
    """Compile a two-line C++ file that includes ``Python.h``, as Inductor's kernels do, with
    ``path``: ``None`` if it works, else what went wrong.

    Cached per compiler file and include path: finding a name is not enough (on a Mac without the
    command-line tools, /usr/bin/clang++ is a stub that exists and fails), so the guard runs it once.
    """
    key = (path, os.stat(path).st_mtime_ns, tuple(include_dirs))
    if key not in _probe_results:
        with tempfile.TemporaryDirectory(prefix="course-cxx-probe-") as scratch:
            source = Path(scratch) / "probe.cpp"
            source.write_text(_PROBE_SOURCE)
            if windows:
                includes = [f"/I{folder}" for folder in include_dirs]
                command = [path, "/nologo", "/c", *includes, str(source), f"/Fo{Path(scratch) / 'probe.obj'}"]
            else:
                includes = [f"-I{folder}" for folder in include_dirs]
                command = [path, "-c", *includes, str(source), "-o", str(Path(scratch) / "probe.o")]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.SubprocessError) as error:
                _probe_results[key] = f"{path} could not be run ({error})"
            else:
                lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
                said = next((line for line in lines if "error" in line.lower()), lines[0])
                _probe_results[key] = (
                    None
                    if done.returncode == 0
                    else f"{path} failed to compile a C++ file that includes Python.h ({said.strip()})"
                )
    return _probe_results[key]


def _missing_python_h(windows: bool) -> str | None:
    """Why kernels cannot be built here for want of ``Python.h``, or ``None`` when it is found.

    A venv on a distribution's Python without its -dev package has the compilers, not the header
    that Inductor's C++ kernels and Triton's launchers include.
    """
    include_dirs = _python_include_dirs(windows)
    if any((Path(folder) / "Python.h").is_file() for folder in include_dirs):
        return None
    python = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return (
        f"Inductor's C++ kernels and Triton's CUDA driver module include Python.h, and there is "
        f"no Python.h in {' or '.join(include_dirs)}: install this Python's development headers "
        f"(on Debian or Ubuntu: apt install {python}-dev), or use backend='aot_eager'."
    )


def _cxx_problem(windows: bool) -> str | None:
    """Why Inductor cannot build CPU kernels here, or ``None`` when a compiler builds against
    ``Python.h``."""
    failures = []
    include_dirs = _python_include_dirs(windows)
    for name in _inductor_cxx_candidates(windows):
        path = shutil.which(name)
        if path is None:
            failures.append(f"{name} is not on the PATH")
            continue
        missing = _missing_python_h(windows)
        if missing:
            return missing
        failure = _probe_cxx(path, windows, include_dirs)
        if failure is None:
            return None
        failures.append(failure)
    hint = (
        "install the Visual Studio Build Tools and start Jupyter from a Developer Command Prompt"
        if windows
        else "install one (apt install g++; on a Mac, xcode-select --install)"
    )
    return (
        "Inductor compiles C++ for the CPU and has no working C++ compiler here "
        f"({'; '.join(failures) or 'none configured'}): {hint}, or use backend='aot_eager'."
    )


def _triton_c_compiler() -> str | None:
    """The C compiler Triton builds its launchers with: $CC, else gcc, else clang on the PATH
    (``triton/runtime/build.py``, Triton 3.4 to 3.9), or None."""
    return os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")


def _device_problem(device: str, version: Version, windows: bool, backend: str) -> str | None:
    needs_codegen = backend in CODEGEN_BACKENDS
    if device == "cuda":
        if not torch.cuda.is_available():
            build = "has no CUDA support" if torch.version.cuda is None else "sees no CUDA GPU"
            return (
                f"CUDA was asked for, but this torch build ({torch.__version__}) {build}. "
                "Use device='cpu', or install a CUDA build of torch on a machine with a GPU."
            )
        if needs_codegen and importlib.util.find_spec("triton") is None:
            package = "triton-windows" if windows else "triton"
            return (
                f"Inductor writes Triton kernels for NVIDIA GPUs and Triton is not installed "
                f"(pip install {package})."
            )
        if needs_codegen and not windows and _triton_c_compiler() is None:  # triton-windows bundles one
            return (
                "Triton builds its CUDA driver module (C that includes Python.h) with a C compiler, and "
                "none was found (it reads $CC, "
                "then looks for gcc and clang on the PATH). Install gcc or clang."
            )
        if needs_codegen and not windows:
            # Triton's CUDA driver module is a Python extension too: its C source includes Python.h.
            missing = _missing_python_h(windows)
            if missing:
                return missing
        major, minor = cuda_capability()  # the GPU profile's, where one is set
        if needs_codegen and (major, minor) < (7, 0):
            name = torch.cuda.get_device_name()
            return f"Triton needs a GPU of compute capability 7.0 or newer; {name} is {major}.{minor}."
        return None
    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            return "MPS (Apple GPU) was asked for, but torch.backends.mps.is_available() is False."
        if needs_codegen and version < Version(MIN_TORCH_MPS):
            return (
                f"Inductor on the Apple GPU runs the course's models from torch {MIN_TORCH_MPS}; this is "
                f"torch {version}, where {MPS_FLOOR_REASON}. Upgrade torch, or set {DEVICE_ENV_VAR}=cpu "
                "to compile for the CPU (backend='aot_eager' runs on MPS without Inductor)."
            )
        return None
    # CPU: Inductor writes C++ and needs a compiler to build it.
    if needs_codegen:
        return _cxx_problem(windows)
    return None


def compile_support(device: str | torch.device | None = None, backend: str = "inductor") -> CompileSupport:
    """Decide whether ``torch.compile`` can run on ``device`` here, and say why.

    Checks, in order: the course-wide off switch (``COURSE_DISABLE_COMPILE=1``), the torch
    version (parsed, not compared as a string), Python support in Dynamo, Windows by torch
    release (2.5, its pre-releases excluded), the device being present, and the code generator's
    toolchain (a C++ compiler and ``Python.h`` on the CPU, Triton and a C compiler on NVIDIA GPUs).
    A missing device is a verdict, not a crash.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"mps"`` (an index such as ``"cuda:0"`` is allowed),
            a ``torch.device``, or ``None`` for the best device available.
        backend: the ``torch.compile`` backend you plan to use; only ``"inductor"`` needs a
            compiler toolchain.

    Example:
        >>> verdict = compile_support("cpu")
        >>> isinstance(verdict.ok, bool) and verdict.reason.endswith(".")
        True
    """
    name = normalize_device(device)
    if not isinstance(backend, str) or not backend:
        raise ValueError(f"backend must be a backend name such as 'inductor'; got {backend!r}")
    if _compile_disabled_by_env():
        return CompileSupport(
            False, f"compiling is switched off by {DISABLE_ENV_VAR}=1; unset it to compile.", name
        )
    version = torch_version()
    if version < Version("2.0"):
        return CompileSupport(
            False,
            f"torch.compile arrived in torch 2.0 and this is torch {version}; upgrade torch.",
            name,
        )
    windows = sys.platform == "win32"
    # Not the base version here: Inductor on Windows landed in July 2024, during 2.5's development
    # (pytorch#131112, #131286), so a 2.5.0a0 snapshot may still refuse it. The release is asked for.
    if windows and Version(str(torch.__version__)) < Version("2.5"):
        return CompileSupport(
            False,
            f"torch {torch.__version__} cannot compile on Windows: Inductor supports Windows from the "
            "torch 2.5 release, not all of its pre-releases (CPU with MSVC; NVIDIA GPUs with the "
            "triton-windows package). Upgrade torch.",
            name,
        )
    problem = _python_problem(version) or _device_problem(name, version, windows, backend)
    if problem:
        return CompileSupport(False, problem, name)
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    toolchain = {
        "cpu": "C++ kernels (its C++ compiler works)",
        "cuda": "Triton kernels",
        "mps": "Metal kernels",
    }[name]
    if backend not in CODEGEN_BACKENDS:
        toolchain = f"the {backend!r} backend"
    return CompileSupport(
        True, f"torch {version} on Python {python} can compile for {name} with {toolchain}.", name
    )


def maybe_compile(model_or_fn: _T, *, device: str | torch.device | None = None, **compile_kwargs: Any) -> _T:
    """``torch.compile(model_or_fn, **compile_kwargs)`` where the guard allows it, else it unchanged.

    When compiling is not possible, one :class:`CompileSkippedWarning` gives the reason and
    the object runs eagerly, so the notebook still works.

    Example:
        >>> square = maybe_compile(lambda x: x * x, backend="eager")
        >>> int(square(torch.tensor(3)))
        9
        >>> torch._dynamo.reset()  # free the compiled code while this example's globals exist
    """
    if not callable(model_or_fn):
        raise TypeError(f"model_or_fn must be an nn.Module or a function; got {type(model_or_fn).__name__}")
    verdict = compile_support(device, backend=_backend_name(compile_kwargs.get("backend")))
    if not verdict.ok:
        warnings.warn(
            f"Not compiling, running eagerly: {verdict.reason}", CompileSkippedWarning, stacklevel=2
        )
        return model_or_fn
    return torch.compile(model_or_fn, **compile_kwargs)


def _backend_name(backend: Any) -> str:
    if backend is None:
        return "inductor"
    if isinstance(backend, str):
        return backend
    # A callable backend (a custom one): it brings its own toolchain, if any.
    return getattr(backend, "__name__", "custom")


def skip_marked_cells(verdict: CompileSupport, cpu_verdict: CompileSupport | None = None) -> bool:
    """In a notebook, let cells marked ``# requires: inductor`` run only if ``verdict.ok``, and
    cells marked ``# requires: inductor-cpu`` only if ``cpu_verdict.ok`` (the CPU's verdict;
    ``verdict`` itself when not given, as on a CPU).

    Where the guard says no, a marked cell does not run: it prints one line naming what it
    skips (the text after the mark), why, and how to fix it.
    Cells that only need Dynamo (``backend="eager"`` / ``"aot_eager"``) carry no mark and run
    everywhere. Returns False outside IPython, where there are no cells to skip.

    Example:
        >>> skip_marked_cells(CompileSupport(False, "No C++ compiler.", "cpu"))  # not in IPython
        False
    """
    cpu_verdict = verdict if cpu_verdict is None else cpu_verdict
    for name, value in (("verdict", verdict), ("cpu_verdict", cpu_verdict)):
        if not isinstance(value, CompileSupport):
            raise TypeError(
                f"{name} must be a CompileSupport from compile_support(); got {type(value).__name__}"
            )
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    transformers = shell.input_transformers_post
    transformers[:] = [t for t in transformers if not getattr(t, "_course_skip", False)]
    transformers.append(_marked_cell_skipper(verdict, cpu_verdict))
    return True


def _marked_cell_skipper(verdict: CompileSupport, cpu_verdict: CompileSupport | None = None) -> Any:
    # Stateless: IPython may transform one cell more than once.
    def skip_if_marked(lines: list[str]) -> list[str]:
        marks = [line.strip() for line in lines[:3] if line.strip().startswith(REQUIRES_INDUCTOR_MARK)]
        if not marks:
            return lines
        mark, judge = REQUIRES_INDUCTOR_MARK, verdict
        if marks[0].startswith(REQUIRES_INDUCTOR_CPU_MARK):
            mark, judge = REQUIRES_INDUCTOR_CPU_MARK, verdict if cpu_verdict is None else cpu_verdict
        if judge.ok:
            return lines
        what = marks[0][len(mark) :].strip(" :-\u2014") or "this cell"
        return [f"print({f'Skipped (needs Inductor): {what}. Why: {judge.reason}'!r})\n"]

    skip_if_marked._course_skip = True  # type: ignore[attr-defined]
    return skip_if_marked
