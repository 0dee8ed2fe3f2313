"""No notebook cell changes process-wide state and leaves it changed (issue 35).

A learner re-runs cells and presses Run All again in the same kernel. A config flag, a thread count,
a matmul precision, an environment variable or a log setting left changed by one cell changes what
every later cell counts. So each such change either

- is a context manager itself (``with torch._dynamo.config.patch(...)``, ``set_stance(...)``);
- sits inside a ``try`` that has a ``finally``, in that ``finally``, or right before such a ``try``
  (the usual "set, try, finally: put back"); or
- carries a ``# process-wide:`` comment, on its line or in the comment lines right above it, that
  says why it stays (a registration that cannot be undone, or the notebook's own setting made once
  in its setup), so it is deliberate.

``make test-rerun`` (tools/rerun.py) then executes every notebook twice in one kernel.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
MARK = "# process-wide:"
# Torch's config modules under the names notebooks import them as.
CONFIG_ALIASES = {"inductor_config", "dynamo_config", "functorch_config", "config_inductor", "config_dynamo"}

# Calls that change the process for every later cell.
CHANGING_CALLS = {
    "torch.set_num_threads",
    "torch.set_num_interop_threads",
    "torch.set_float32_matmul_precision",
    "torch.set_default_dtype",
    "torch.set_default_device",
    "torch.use_deterministic_algorithms",
    "torch.set_flush_denormal",
    "torch._logging.set_logs",
    "torch.compiler.set_stance",
    "torch.compiler.allow_in_graph",
    "torch._dynamo.allow_in_graph",
    "torch._dynamo.disallow_in_graph",
    "torch.compiler.substitute_in_graph",
    "torch.library.custom_op",
    "torch.library.define",
    "torch.library.impl",
    "torch.library.register_fake",
    "torch.library.register_kernel",
    "torch.library.register_autograd",
    "torch.library.triton_op",
    "os.environ.update",
    "os.environ.pop",
    "os.environ.setdefault",
    "os.environ.clear",
    "os.putenv",
    "os.unsetenv",
    "os.chdir",
    "setattr",
}


def _dotted(node: ast.AST) -> str:
    """``torch._dynamo.config.x`` for an attribute chain, ``os.environ`` for a subscript's value."""
    parts = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    return ".".join(reversed(parts))


def _changes(node: ast.AST) -> str | None:
    """What a statement or call changes for the whole process, or None."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            name = _dotted(target)
            if isinstance(target, ast.Attribute) and name.startswith("torch.") and "()" not in name:
                return name  # torch._dynamo.config.x = ..., torch.backends.cudnn.allow_tf32 = ...
            if isinstance(target, ast.Attribute) and name.split(".")[0] in CONFIG_ALIASES:
                return name  # inductor_config.x = ... (a module imported under another name)
            if isinstance(target, ast.Subscript) and name == "os.environ":
                return "os.environ[...]"
    if isinstance(node, ast.Call):
        name = _dotted(node.func)
        if name in CHANGING_CALLS:  # a call used as a decorator too
            if name == "setattr" and not (node.args and _dotted(node.args[0]).startswith("torch.")):
                return None
            return name
    return None


def _allowed(path: list[ast.AST], node: ast.AST) -> bool:
    """Whether a change at ``node`` (``path``: its ancestors, outermost first) is put back."""
    for depth, ancestor in enumerate(path):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)):
            if any(_within(node, item.context_expr) for item in ancestor.items):
                return True  # the change is the context manager
        if isinstance(ancestor, ast.Try) and ancestor.finalbody:
            return True  # inside the try, or in its finally
        statement = path[depth + 1] if depth + 1 < len(path) else node
        for field in ("body", "orelse", "finalbody"):
            block = getattr(ancestor, field, None)
            if isinstance(block, list) and statement in block:
                later = block[block.index(statement) + 1 :]
                # "set, then try/finally": only assignments of names or more changes in between
                for follower in later:
                    if isinstance(follower, ast.Try) and follower.finalbody:
                        return True
                    if not (isinstance(follower, (ast.Assign, ast.Expr)) and _changes_any(follower)):
                        break
    return False


def _within(node: ast.AST, tree: ast.AST) -> bool:
    return any(child is node for child in ast.walk(tree))


def _changes_any(statement: ast.AST) -> bool:
    return any(_changes(child) for child in ast.walk(statement))


def _parse(source: str) -> ast.Module | None:
    if source.lstrip().startswith("%%"):
        return None  # a cell magic: not Python
    lines = ["pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    return ast.parse("\n".join(lines))


def unrestored_changes(source: str) -> list[str]:
    """Each process-wide change in a cell's source that is not put back nor marked, as ``line: what``.

    >>> unrestored_changes("import torch\\ntorch.set_num_threads(1)")
    ['2: torch.set_num_threads']
    >>> unrestored_changes("n = torch.get_num_threads()\\ntorch.set_num_threads(1)\\ntry:\\n    pass\\n"
    ...                    "finally:\\n    torch.set_num_threads(n)")
    []
    """
    tree = _parse(source)
    if tree is None:
        return []
    lines = source.splitlines()
    found = []

    def visit(node: ast.AST, path: list[ast.AST]) -> None:
        what = _changes(node)
        if what and not (isinstance(node, ast.Call) and _is_statement_part(path)):
            if not _marked(lines, node.lineno) and not _allowed(path, node):
                found.append(f"{node.lineno}: {what}")
        for child in ast.iter_child_nodes(node):
            visit(child, [*path, node])

    visit(tree, [])
    return found


def _marked(lines: list[str], lineno: int) -> bool:
    """The mark on the line itself, or in the block of comment lines right above it."""
    if MARK in lines[lineno - 1]:
        return True
    above = lineno - 2
    while above >= 0 and lines[above].strip().startswith("#"):
        if MARK in lines[above]:
            return True
        above -= 1
    return False


def _is_statement_part(path: list[ast.AST]) -> bool:
    """A call inside an assignment already flagged as a whole (avoids reporting a line twice)."""
    return bool(path) and isinstance(path[-1], (ast.Assign, ast.AugAssign)) and _changes(path[-1]) is not None


@pytest.mark.parametrize(
    "source",
    [
        "torch._dynamo.config.capture_scalar_outputs = True",
        "torch._inductor.config.cpp.enable_kernel_profile = True",
        "from torch._inductor import config as inductor_config\ninductor_config.freezing = True",
        "os.environ['TORCHINDUCTOR_CACHE_DIR'] = '/somewhere'",
        "os.environ.update({'A': '1'})",
        "del os.environ['A']",
        "torch.set_float32_matmul_precision('highest')",
        "torch._logging.set_logs(recompiles=True)\nf(x)\ntorch._logging.set_logs()",
        "torch.compiler.set_stance('force_eager')",
        "torch.compiler.allow_in_graph(f)",
        "torch.compiler.substitute_in_graph(bisect.bisect_right)(mine)",
        "@torch.library.custom_op('course::f', mutates_args=())\ndef f(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x.clone()",
        "with torch.no_grad():\n    torch.set_num_threads(2)",
        "setattr(torch._dynamo.config, 'cache_size_limit', 4)",
        "def f():\n    torch.set_num_threads(1)",
    ],
)
def test_the_check_finds_a_change_left_behind(source):
    assert unrestored_changes(source), source


@pytest.mark.parametrize(
    "source",
    [
        "with torch._dynamo.config.patch(capture_scalar_outputs=True):\n    f(x)",
        "with torch._inductor.config.patch(freezing=True), torch.no_grad():\n    f(x)",
        "with torch.compiler.set_stance('force_eager'):\n    f(x)",
        "before = torch.get_num_threads()\ntorch.set_num_threads(1)\ntry:\n    f(x)\n"
        "finally:\n    torch.set_num_threads(before)",
        "torch._logging.set_logs(recompiles=True)\ntry:\n    f(x)\nfinally:\n    torch._logging.set_logs()",
        "previous = os.environ.get('A')\nos.environ['A'] = '1'\ntry:\n    f()\nfinally:\n"
        "    os.environ.pop('A')",
        "torch.set_num_threads(1)  # process-wide: this notebook's setting, made once in its setup",
        "# process-wide: redefined, not added, by a re-run\n# (more on why)\n"
        "@torch.library.custom_op('course::f', mutates_args=())\ndef f(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x.clone()",
        "config.tie_word_embeddings = False  # a model config, not the process",
        "tiny_config.tie_word_embeddings = False",
        "x = torch.get_num_threads()\nprint(torch._dynamo.config.recompile_limit)",
        "%time f(x)\n!ls",
    ],
)
def test_the_check_lets_a_restored_change_pass(source):
    assert unrestored_changes(source) == [], source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_leaves_process_wide_state_changed(path):
    notebook = nbformat.read(path, as_version=4)
    left = [
        f"cell {index}, line {finding}"
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        for finding in unrestored_changes(cell.source)
    ]
    assert not left, (
        f"{path.name}: put these back (a `with ... patch(...)` or try/finally), or mark the line "
        f"'{MARK} <why it stays>': " + "; ".join(left)
    )
