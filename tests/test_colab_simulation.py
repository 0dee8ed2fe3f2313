"""Colab, simulated on this machine: the setup cell's install path, which no other test runs.

What Colab has and this simulation reproduces:
- a Python environment with torch, transformers and matplotlib but not the course: a fresh venv
  whose only packages are this environment's (reached through a .pth line, which does not run the
  editable install's hook, so ``helpers`` is not importable);
- ``google.colab`` imported when the kernel starts (a stand-in module, imported by a .pth line);
- the notebook opened outside the repository (its folder has no ../helpers);
- ``COURSE_REPO`` pointing at the course's repository: here a ``file://`` clone of this one, set
  the way an instructor sets it for a fork (the URL in the setup cell).

Notebook 01 must install the helpers from the clone and run to the end (lax: cells run, asserts
hold, outputs are not compared). The two failures the setup cell handles must each end in its
one sentence and no traceback: an unreachable ``COURSE_REPO``, and a ``helpers`` module of the
learner's own that shadows the course's.

A few minutes (a venv, a pip install from a git clone, one notebook); `make test-colab` runs
only this file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tools.setup_cell import SETUP_TAG, repository_url, setup_cell_source

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "01_guarded_compile.ipynb"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the course")


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> dict[str, Path]:
    """A simulated Colab runtime: its python, a kernelspec folder, a clone of the course, a workdir."""
    scratch = tmp_path_factory.mktemp("colab")
    clone = scratch / "course-clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)

    venv = scratch / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    venv_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    stand_ins = scratch / "colab-modules"
    (stand_ins / "google" / "colab").mkdir(parents=True)
    (stand_ins / "google" / "colab" / "__init__.py").write_text(
        '"""A stand-in: the kernel runs on Colab."""\n'
    )
    # Our stand-in first (a real `google` namespace package in site-packages must not hide it), then
    # this environment's packages (torch, transformers, matplotlib, ipykernel), then google.colab
    # imported at start-up, as Colab's kernel does.
    (venv_site / "00-colab-simulation.pth").write_text(
        f"{stand_ins}\n{sysconfig.get_paths()['purelib']}\nimport google.colab\n"
    )
    for name in ("torch", "transformers", "matplotlib", "google.colab"):
        subprocess.run([str(python), "-c", f"import {name}"], check=True)
    kernels = scratch / "jupyter"
    spec = kernels / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Colab", "language": "python"})
    )
    workdir = scratch / "content"  # Colab's working directory; no ../helpers beside it
    workdir.mkdir()
    runtime = {"python": python, "kernels": kernels, "clone": clone, "workdir": workdir}
    _assert_course_not_installed(runtime)
    return runtime


def _notebook_for(repo_url: str, *, setup_only: bool) -> nbformat.NotebookNode:
    """Notebook 01 with COURSE_REPO pointed at ``repo_url`` (what an instructor edits for a fork)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:
        if SETUP_TAG in cell.metadata.get("tags", []):
            # The template the committed cell equals (tests/test_notebooks.py checks it).
            cell.source = setup_cell_source().replace(repository_url(), repo_url)
            if setup_only:
                notebook.cells = [cell]
            return notebook
    raise AssertionError(f"notebook 01 has no cell tagged {SETUP_TAG!r}")


def _execute(notebook, colab, monkeypatch, *, allow_errors: bool) -> nbformat.NotebookNode:
    monkeypatch.setenv("JUPYTER_PATH", str(colab["kernels"]))
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    client = NotebookClient(
        notebook,
        timeout=900,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(colab["workdir"])}},
    )
    client.execute()
    return notebook


def _assert_course_not_installed(colab) -> None:
    found = subprocess.run(
        [str(colab["python"]), "-c", "import importlib.util; print(importlib.util.find_spec('helpers'))"],
        check=True,
        capture_output=True,
        text=True,
        cwd=colab["workdir"],
    ).stdout.strip()
    assert found == "None", f"the simulated Colab must not see the course yet: {found}"


def _setup_failure(notebook) -> tuple[str, str]:
    """The setup cell's error: its one sentence, and everything the learner sees with it."""
    errors = [o for o in notebook.cells[0].outputs if o.output_type == "error"]
    assert len(errors) == 1, notebook.cells[0].outputs
    shown = "\n".join(errors[0].traceback)
    return errors[0].evalue, shown


def test_an_unreachable_repository_ends_in_one_sentence(colab, monkeypatch):
    _assert_course_not_installed(colab)
    missing = colab["clone"].parent / "no-such-fork"
    notebook = _execute(
        _notebook_for(f"file://{missing}", setup_only=True), colab, monkeypatch, allow_errors=True
    )
    sentence, shown = _setup_failure(notebook)
    assert sentence.startswith("Installing the course helpers from file://") and "COURSE_REPO" in sentence
    assert "pip said:" in sentence  # pip's own lines that name the cause, so the learner sees why
    said = sentence.split("pip said:", 1)[1]
    assert "fatal:" in said and "no-such-fork" in said, said  # git's line, not pip's generic trailer
    assert "subprocess-exited-with-error" not in said and "See above" not in said, said
    assert "Traceback" not in shown and 'File "' not in shown, shown


def test_a_shadowing_helpers_module_ends_in_one_sentence(colab, monkeypatch):
    shadow = colab["workdir"] / "helpers.py"
    shadow.write_text("# the learner's own helpers module\n")
    try:
        notebook = _execute(
            _notebook_for(f"file://{colab['clone']}", setup_only=True), colab, monkeypatch, allow_errors=True
        )
    finally:
        os.remove(shadow)
    sentence, shown = _setup_failure(notebook)
    assert "`import helpers` found" in sentence and "rename your own helpers module" in sentence
    assert "Traceback" not in shown and 'File "' not in shown, shown


def test_notebook_01_installs_the_helpers_from_the_repository_and_runs_to_the_end(
    colab, monkeypatch, tmp_path
):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    try:
        notebook = _execute(
            _notebook_for(f"file://{colab['clone']}", setup_only=False),
            colab,
            monkeypatch,
            allow_errors=False,
        )
        requires = subprocess.run(  # the install brings notebook 10's trace reader too
            [
                str(colab["python"]),
                "-c",
                "import importlib.metadata as m; print(m.requires('torch-compile-course'))",
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=colab["workdir"],
        ).stdout
        installed = subprocess.run(
            [str(colab["python"]), "-c", "import helpers; print(helpers.__file__)"],
            check=True,
            capture_output=True,
            text=True,
            cwd=colab["workdir"],
        ).stdout
    finally:  # the runtime is "fresh" again for any test after this one
        subprocess.run([str(colab["python"]), "-m", "pip", "uninstall", "-q", "-y", "torch-compile-course"])
    assert "site-packages" in installed and str(ROOT) not in installed, installed
    assert "tlparse" in requires, requires
    card = next(c for c in notebook.cells if "environment_card" in c.source)
    card_text = "".join(o.get("text", "") for o in card.outputs)
    assert "torch" in card_text and "compile" in card_text, card_text
