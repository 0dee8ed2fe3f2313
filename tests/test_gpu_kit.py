"""The GPU run kit's scheduling and its table, with the notebooks' runs replaced (no GPU here)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from tools import gpu_kit


@pytest.fixture
def fake_runs(monkeypatch):
    """Each notebook "runs" for a moment; records which ran at the same time and with what env."""
    running, seen = set(), {"most_at_once": 0, "order": [], "threads": set()}
    lock = threading.Lock()

    def run_one(prefix, work, env, cap):
        with lock:
            running.add(prefix)
            seen["most_at_once"] = max(seen["most_at_once"], len(running))
            seen["order"].append(prefix)
            seen["threads"].add(env.get("TORCHINDUCTOR_COMPILE_THREADS"))
        time.sleep(0.05)
        with lock:
            running.discard(prefix)
        failure = "cell 3: AssertionError" if prefix == "05" else None
        return {"notebook": prefix, "seconds": 0.05, "failure": failure, "skipped": 0}

    monkeypatch.setattr(gpu_kit, "install", lambda site: True)
    monkeypatch.setattr(gpu_kit, "_time_cpu_compile", lambda env: "first CPU compile 1.0 s")
    monkeypatch.setattr(gpu_kit, "_run_one", run_one)
    return seen


def test_parallel_runs_the_slowest_first_and_reports_in_the_order_asked(fake_runs, tmp_path):
    prefixes = ["04", "02", "05", "09"]
    assert gpu_kit.run(tmp_path, prefixes, None, budget=100, parallel=2) == 1  # 05 failed
    results = json.loads((tmp_path / "results.json").read_text())
    assert [row["notebook"] for row in results["rows"]] == prefixes
    assert results["parallel"] == 2
    assert set(fake_runs["order"][:2]) == {"02", "05"}  # LONGEST_FIRST: the two slowest start first
    assert fake_runs["most_at_once"] == 2
    assert fake_runs["threads"] == {str(max(4, (gpu_kit.os.cpu_count() or 1) // 2))}
    assert "2 notebooks ran at a time" in gpu_kit.device_table([tmp_path])


def test_one_at_a_time_keeps_the_order_asked_and_says_no_load(fake_runs, tmp_path):
    assert gpu_kit.run(tmp_path, ["04", "02"], None, budget=100) == 0
    assert fake_runs["order"] == ["04", "02"] and fake_runs["most_at_once"] == 1
    assert fake_runs["threads"] == {None}
    assert "at a time" not in gpu_kit.device_table([tmp_path])


def test_out_of_budget_notebooks_are_reported_not_run(fake_runs, tmp_path):
    gpu_kit.run(tmp_path, ["04", "02"], None, budget=gpu_kit.MIN_START_S - 1, parallel=2)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [row["failure"] for row in rows] == ["not run: out of time"] * 2
    assert fake_runs["order"] == []


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--parallel", "--parallel takes a count of at least 1, not 0"),
        ("--cap", "--cap takes a number of seconds above 0, not 0"),
    ],
)
def test_a_bad_count_is_refused_by_name(option, message):
    done = subprocess.run(
        [sys.executable, "-m", "tools.gpu_kit", "run", "--out", "unused", option, "0"],
        capture_output=True, text=True, cwd=gpu_kit.ROOT,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr


def test_readme_replaces_a_runs_section_and_keeps_the_others(fake_runs, tmp_path, monkeypatch):
    run = tmp_path / "run-b"
    gpu_kit.run(run, ["04"], None, budget=100)
    readme = tmp_path / "README.md"
    old = "**run-a**: an older run\n\n| 01 | passed | 1 s |\n\n**run-b**: stale\n"
    readme.write_text(f"intro\n<!-- device-table -->\n{old}<!-- /device-table -->\nafter\n")
    monkeypatch.setattr(gpu_kit, "ROOT", tmp_path)
    gpu_kit.write_readme([run])
    text = readme.read_text()
    assert "**run-a**: an older run" in text and "| 01 | passed | 1 s |" in text  # kept
    assert "stale" not in text and "| 04 | passed | 0 s |" in text  # run-b's section replaced
    assert "Before the notebooks, idle: first CPU compile 1.0 s." in text
    assert text.startswith("intro\n") and text.endswith("<!-- /device-table -->\nafter\n")
