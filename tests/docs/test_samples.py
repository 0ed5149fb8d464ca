"""Every code sample in docs/ runs, every ``hailq`` call in it exists, and the site builds.

Each page runs in a subprocess of its own, in a fresh temporary directory,
its blocks in document order (see ``samples.py``). Pages marked
``<!-- docs-test: postgres -->`` run against a fresh PostgreSQL schema of the
test server (``HAILQ_TEST_PG``); without one they are skipped, except in CI.
Their samples read ``HAILQ_URL`` (the broker, with ``?schema=``) and
``DATABASE_URL`` (the same database for the application's own connections).
"""

from __future__ import annotations

import doctest
import importlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from hailq.cli.main import cli

from .samples import blocks, command_name, hailq_invocations

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUNNER = Path(__file__).with_name("samples.py")
HAILQ = str(Path(sys.executable).with_name("hailq"))
# Pages in docs/ written by others; the site build stubs them while they are missing.
OWNED_ELSEWHERE = ("performance.md", "reliability.md")

# The README's quick start is a page like the others: its samples run too.
PAGES = [ROOT / "README.md",
         *sorted(p for p in DOCS.rglob("*.md") if p.name not in OWNED_ELSEWHERE)]


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS if page.is_relative_to(DOCS) else ROOT))


def test_docs_have_pages_with_samples() -> None:
    assert PAGES, "docs/ has no pages"
    assert sum(1 for p in PAGES for b in blocks(p) if b.language == "python") >= 30


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_samples_run(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    runnable = [b for b in blocks(page) if b.runnable and b.language in ("python", "console")]
    if not runnable:
        pytest.skip("no runnable samples on this page")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAILQ_")}
    # Not the page's directory: `hailq worker checkers:app` must find checkers.py in its
    # working directory by itself, as it does for a user.
    env["PYTHONPATH"] = str(ROOT / "src")
    env["PATH"] = os.pathsep.join([str(Path(HAILQ).parent), env.get("PATH", "")])
    if "<!-- docs-test: postgres -->" in page.read_text(encoding="utf-8"):
        # tests/conftest.py's fixture: a fresh schema, dropped afterwards; skips without
        # a server (fails in CI).
        # The page's own tables land in the same throwaway schema (search_path).
        url = str(request.getfixturevalue("pg_url"))
        env["HAILQ_URL"] = url
        env["DATABASE_URL"] = url.rsplit("schema=", 1)[0].rstrip("?&")
        env["PGOPTIONS"] = f"-c search_path={url.rsplit('schema=', 1)[1]}"
    result = subprocess.run([sys.executable, str(RUNNER), str(page), HAILQ], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=240,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-6000:] or result.stdout[-6000:]


def _all_options(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_hailq_call_names_real_commands_and_options(page: Path) -> None:
    """Shell samples, runnable or not, use only commands and options that exist."""
    group_options = _all_options(cli)
    ctx = click.Context(cli)
    for block in blocks(page):
        if block.language not in ("console", "bash", "sh", "shell"):
            continue
        for args in hailq_invocations(block):
            name = command_name(args)
            if name is None:
                continue
            command = cli.get_command(ctx, name)
            assert command is not None, f"{block.where()}: no command 'hailq {name}'"
            allowed = group_options | _all_options(command)
            for arg in args:
                if arg.startswith("-") and arg != "-":
                    option = arg.split("=", 1)[0]
                    assert option in allowed, (
                        f"{block.where()}: 'hailq {name}' has no option {option}")


def test_cli_reference_names_every_command() -> None:
    text = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    for name in cli.list_commands(click.Context(cli)):
        assert f"hailq {name}" in text, f"reference/cli.md does not mention 'hailq {name}'"


def test_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict`` on a copy, with stubs for pages others have not written yet."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings[python] is not installed")
    pytest.importorskip("mkdocs_click", reason="mkdocs-click is not installed")
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    work = tmp_path / "site-src"
    shutil.copytree(DOCS, work / "docs")
    shutil.copy(ROOT / "mkdocs.yml", work / "mkdocs.yml")
    os.symlink(ROOT / "src", work / "src")
    for name in OWNED_ELSEWHERE:
        page = work / "docs" / name
        if not page.exists():
            page.write_text(f"# {name[:-3].title()}\n\nNot written yet.\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
         str(tmp_path / "site")], cwd=work, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-6000:]
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text("utf-8")
    for name in cli.list_commands(click.Context(cli)):
        assert f"hailq {name}" in cli_page, f"the built CLI reference lacks 'hailq {name}'"
    # The lazily loaded commands have mkdocs-click blocks of their own: their options show.
    for option in ("--concurrency", "--pool", "--claims", "--scale", "--checkers"):
        assert option in cli_page, f"the built CLI reference lacks {option}"
    api_page = (tmp_path / "site" / "reference" / "api" / "index.html").read_text("utf-8")
    for name in ("connect", "Queue", "Message", "Topic", "Inbox", "LeaseLost"):
        assert name in api_page


def _api_reference_modules() -> list[str]:
    """The modules whose docstrings reference/api.md renders (its ``::: module.Name`` lines)."""
    text = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    modules: set[str] = set()
    for target in re.findall(r"^::: ([\w.]+)\s*$", text, flags=re.MULTILINE):
        path = target
        while path:
            try:
                importlib.import_module(path)
            except ModuleNotFoundError:
                path = path.rpartition(".")[0]
                continue
            modules.add(path)
            break
    return sorted(modules)


API_MODULES = _api_reference_modules()


def test_api_reference_renders_docstring_examples() -> None:
    assert "hailq.runtime.app" in API_MODULES
    finder = doctest.DocTestFinder()
    examples = sum(len(test.examples) for name in API_MODULES
                   for test in finder.find(importlib.import_module(name)))
    assert examples >= 2, "the API reference has no '>>>' examples to run"


@pytest.mark.parametrize("module", API_MODULES)
def test_api_reference_docstring_examples_run(module: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``>>>`` examples in the docstrings that reference/api.md shows run as written."""
    monkeypatch.chdir(tmp_path)  # an example may create claims.db
    for name in [k for k in os.environ if k.startswith("HAILQ_")]:
        monkeypatch.delenv(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in doctest.DocTestFinder().find(importlib.import_module(module)):
        runner.run(test, out=report.write)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, report.getvalue()
