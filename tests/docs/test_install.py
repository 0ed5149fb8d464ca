"""The install samples of the README and of Getting started install hailq as written:
from a copy of the checkout (a clone's folder ``hailq``), into a fresh virtual
environment, with the pip of that environment (dependencies and the build backend
come from the package index, as they do for a user)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .samples import blocks, console_commands

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]
LEFT_OUT = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".mypy_cache",
                                  ".ruff_cache", ".hypothesis", ".pytest_cache", "site",
                                  "dist", "build", "*.db", "*.db-*")


def install_commands() -> list[str]:
    """The ``$ ...`` lines of every install block, in page order, each once."""
    found: list[str] = []
    for page in PAGES:
        install = [b for b in blocks(page) if b.apart == "install"]
        assert install, f"{page.name} shows no install sample"
        for block in install:
            found += [c for c in console_commands(block) if c not in found]
    return found


@pytest.mark.slow  # a long scenario: .ci/run runs it after make test
def test_the_install_samples_install_hailq(tmp_path: Path) -> None:
    commands = install_commands()
    assert any("./hailq" in c for c in commands) and any(".whl" in c for c in commands)
    assert not any(c.split()[:3] in (["pip", "install", "hailq"],
                                     ["pip", "install", "'hailq[postgres]'"])
                   for c in commands), "hailq is on no package index"
    shutil.copytree(ROOT, tmp_path / "hailq", ignore=LEFT_OUT)
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("HAILQ_")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv)
    for command in commands:
        done = subprocess.run(command, shell=True, executable="/bin/bash", cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"$ {command}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    # The environment's own hailq, not this checkout's sources: it sends and lists.
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import hailq, psycopg; print(hailq.__file__)"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv)
    hailq_script = str(venv / "bin" / "hailq")
    url = f"sqlite:///{tmp_path / 'claims.db'}"
    sent = subprocess.run([hailq_script, "--url", url, "send", "--create", "claims", "1"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert sent.returncode == 0, sent.stderr
    listed = subprocess.run([hailq_script, "--url", url, "--json", "queues"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert [q["ready"] for q in json.loads(listed.stdout)] == [1]
