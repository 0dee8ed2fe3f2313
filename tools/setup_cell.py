"""The setup cell every notebook starts with, generated from the one repository URL.

The URL lives in pyproject.toml ([project.urls] Repository). `make notebooks` writes this
cell into each notebook; tests/test_notebooks.py fails if a notebook's copy differs.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP_TAG = "course-setup"

#: The cell is collapsed: a Colab form (the ``@title`` line, ``cellView``) and hidden source in
#: JupyterLab, so the first thing a learner reads is the lesson.
SETUP_METADATA = {"tags": [SETUP_TAG], "cellView": "form", "jupyter": {"source_hidden": True}}

_TEMPLATE = """\
# @title Setup (run this cell first) {{ display-mode: "form" }}
# On Colab this installs the course helpers (Colab's own torch is kept); elsewhere it does
# nothing once the course is installed (`make lab`), and falls back to ../helpers.
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

# Working from a fork? Put its URL here.
COURSE_REPO = "{url}"
if importlib.util.find_spec("helpers") is None and (Path.cwd().parent / "helpers" / "guard.py").is_file():
    sys.path.insert(0, str(Path.cwd().parent))
if importlib.util.find_spec("helpers") is None and "google.colab" in sys.modules:
    pip = [sys.executable, "-m", "pip", "install", "-q", f"git+{{COURSE_REPO}}"]
    installed = subprocess.run(pip, capture_output=True, text=True)
    if installed.returncode:  # pip ends with a generic trailer: show the lines that name the cause
        said = (installed.stderr or installed.stdout).strip().splitlines()
        cause = r"fatal:|ERROR:|Could not|error: (?!subprocess)"
        causes = [line.strip() for line in said if re.search(cause, line)]
        pip_said = "\\n".join(dict.fromkeys(causes or said[-4:]))
        raise SystemExit(f"Installing the course helpers from {{COURSE_REPO}} failed: check the URL (set "
                         "COURSE_REPO to your fork's) and the runtime's network, then run this cell again. "
                         f"pip said:\\n{{pip_said}}")
    importlib.invalidate_caches()  # the package just installed must be found by this kernel
import helpers  # noqa: E402

if getattr(helpers, "COURSE", None) != "torch-compile-course":
    raise SystemExit(f"`import helpers` found {{helpers.__file__}}, not this course's package: rename your "
                     "own helpers module (or restart the runtime) and run this cell again.")"""


def repository_url() -> str:
    """The course repository's URL, read from pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^Repository\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    if not match:
        raise RuntimeError("pyproject.toml has no [project.urls] Repository entry")
    return match.group(1)


def setup_cell_source() -> str:
    """The exact source of the setup cell."""
    return _TEMPLATE.format(url=repository_url())


def colab_url(notebook: str) -> str:
    """The 'Open in Colab' address of a notebook in the repository."""
    path = repository_url().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{path}/blob/main/notebooks/{notebook}"
