"""``./run``, the quick start's entry point, on a fresh copy of the tree: ``./run serve``
installs only what serving needs, says what it is doing, and skips the install when nothing
changed since the last one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_FOR_SERVING = ("pytest", "pyspark", "pyarrow", "nats", "redis", "selenium", "schemathesis")


def _fresh_copy(destination: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for name in files:
        if name.startswith("tests/") or not (ROOT / name).is_file():
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
        target.chmod((ROOT / name).stat().st_mode)
    return destination


def _run_serve_help(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["./run", "serve", "--help"], cwd=tree, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.slow
def test_run_serve_installs_only_serving_dependencies_once(tmp_path) -> None:
    tree = _fresh_copy(tmp_path / "rill")

    first = _run_serve_help(tree)
    assert first.returncode == 0, first.stderr
    assert "==> creating the virtual environment .venv" in first.stderr
    assert "==> installing rill into .venv" in first.stderr
    assert "Collecting fastapi" in first.stderr  # progress: what pip is fetching
    assert "Usage: rill serve" in first.stdout
    present = subprocess.run(
        [str(tree / ".venv/bin/python"), "-c",
         "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] "
         "if importlib.util.find_spec(m)))", *NOT_FOR_SERVING],
        capture_output=True, text=True, check=True).stdout.split()
    assert present == []

    second = _run_serve_help(tree)
    assert second.returncode == 0, second.stderr
    assert "==>" not in second.stderr and "Collecting" not in second.stderr
    assert "Usage: rill serve" in second.stdout
