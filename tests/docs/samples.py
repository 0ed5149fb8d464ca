"""Find the code samples of the docs and run one page's samples in order.

A page is a list of blocks in document order:

- ```` ```python ```` blocks run in one namespace per page;
- ```` ```python title="name.py" ```` blocks are written to ``name.py`` in the
  page's directory (so later blocks and ``hailq worker`` can import them);
- ```` ```console ```` blocks run each ``$ hailq ...`` line and expect exit code 0.

A fence directly after the line ``<!-- no-run -->`` is shown, never run; a
page whose text holds ``<!-- docs-test: postgres -->`` runs against a fresh
PostgreSQL schema (its samples read the URL from ``HAILQ_URL``).

Run as a script (``python samples.py PAGE.md``) it executes the page in the
current directory and exits non-zero on the first failure, naming the block.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

NO_RUN = "<!-- no-run -->"
POSTGRES_MARK = "<!-- docs-test: postgres -->"
FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    language: str
    info: str
    code: str
    runnable: bool

    @property
    def title(self) -> str | None:
        match = TITLE.search(self.info)
        return match.group("title") if match else None

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in document order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, info = match.group("fence"), match.group("info").strip()
        indent = len(match.group("indent"))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1
        previous = next((lines[j].strip() for j in range(start - 1, -1, -1)
                         if lines[j].strip()), "")
        language = info.split()[0] if info else ""
        runnable = previous != NO_RUN and "no-run" not in info.split()
        found.append(Block(str(path), start + 1, language, info, "\n".join(body) + "\n",
                           runnable))
    return found


def console_commands(block: Block) -> list[str]:
    """The ``$ ...`` command lines of a console block (continuation lines joined)."""
    commands: list[str] = []
    current: str | None = None
    for line in block.code.splitlines():
        if current is not None:
            current += " " + line.strip()
        elif line.startswith("$ "):
            current = line[2:].strip()
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        commands.append(current)
        current = None
    return commands


def hailq_invocations(block: Block) -> list[list[str]]:
    """Argument lists of every ``hailq ...`` call in a shell block (runnable or not)."""
    calls: list[list[str]] = []
    text = block.code.replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        if line.startswith("#") or "hailq " not in line:
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, word in enumerate(words):
            if word == "hailq" or word.endswith("/hailq"):
                args = []
                for w in words[i + 1:]:
                    if w in ("|", "&&", ";", ">", "2>&1", "||"):
                        break
                    args.append(w)
                calls.append(args)
                break
    return calls


def run_page(page: Path, hailq: str) -> None:
    """Run every runnable block of ``page`` in the current directory; raise on failure."""
    sys.path.insert(0, os.getcwd())
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in blocks(page):
        if not block.runnable:
            continue
        if block.language == "python" and block.title and block.title.endswith(".py"):
            Path(block.title).write_text(block.code, encoding="utf-8")
            continue
        if block.language == "python":
            try:
                exec(compile(block.code, block.where(), "exec"), namespace)
            except BaseException:
                raise SampleFailed(block, traceback.format_exc()) from None
        elif block.language == "console":
            for command in console_commands(block):
                if not command.startswith("hailq "):
                    _run_shell(block, command)
                    continue
                args = shlex.split(command)[1:]
                result = subprocess.run([hailq, *args], capture_output=True, text=True,
                                        timeout=120, stdin=subprocess.DEVNULL)
                if result.returncode != 0:
                    raise SampleFailed(block, f"$ {command}\nexit {result.returncode}\n"
                                              f"{result.stdout}{result.stderr}")


def _run_shell(block: Block, command: str) -> None:
    if command.startswith("export "):
        name, _, value = command[len("export "):].partition("=")
        os.environ[name.strip()] = shlex.split(value)[0] if value else ""
        return
    result = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL, executable="/bin/bash")
    if result.returncode != 0:
        raise SampleFailed(block, f"$ {command}\nexit {result.returncode}\n"
                                  f"{result.stdout}{result.stderr}")


class SampleFailed(Exception):
    def __init__(self, block: Block, detail: str) -> None:
        super().__init__(f"sample at {block.where()} ({block.language}) failed:\n{detail}")


if __name__ == "__main__":
    try:
        run_page(Path(sys.argv[1]), sys.argv[2])
    except SampleFailed as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
