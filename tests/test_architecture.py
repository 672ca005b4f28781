"""The seams of ../shared/DESIGN.md hold: import-linter's contracts (pyproject.toml,
``[tool.importlinter]``) are all kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_are_kept():
    linter = Path(sys.executable).with_name("lint-imports")
    checked = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 broken" in checked.stdout
