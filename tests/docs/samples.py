"""Find the code samples of the docs and run one page's samples in order.

A page is a list of blocks in document order:

- ```` ```python ```` blocks run in one namespace per page;
- ```` ```python title="name.py" ```` blocks are written to ``name.py`` in the
  page's directory (so later blocks and ``hailq worker`` can import them);
- ```` ```console ```` blocks run each ``$ hailq ...`` line and expect exit code 0;
  a ``$ hailq worker ...`` line runs in the background until the worker is
  registered as running and its queues have nothing ready, then gets SIGTERM
  and must exit with code 0 (see ``run_worker``);
- in a ``python`` block, a one-line ``print(...)  # -> VALUE`` must print
  ``VALUE``; text after ``VALUE`` and ``: `` or ``, `` is prose, not compared.

A fence directly after the line ``<!-- no-run -->`` is shown, never run; one
directly after ``<!-- docs-test: KIND -->`` is run apart, by a test of its own:
``install`` samples install hailq into a virtual environment of their own beside
a copy of the checkout (``test_install.py``), ``http`` samples call a real
``hailq serve`` (``test_http_guide.py``); a page whose text holds
``<!-- docs-test: postgres -->`` runs against a fresh PostgreSQL schema (its samples
read the URL from ``HAILQ_URL``).

Run as a script (``python samples.py PAGE.md``) it executes the page in the
current directory and exits non-zero on the first failure, naming the block.
"""

from __future__ import annotations

import builtins
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import hailq

NO_RUN = "<!-- no-run -->"
APART = re.compile(r"^<!-- docs-test: (?P<kind>install|http) -->$")
POSTGRES_MARK = "<!-- docs-test: postgres -->"
FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
# A one-line print whose output the comment states: print(...)  # -> VALUE
EXPECT = re.compile(r"^print\(.*\)\s+# -> (?P<expected>.+)$")
WORKER_START_TIMEOUT = 60.0  # seconds until the worker is registered as running
WORKER_WORK_TIMEOUT = 30.0  # ... until its queues have nothing ready
WORKER_STOP_TIMEOUT = 15.0  # ... until it exits after SIGTERM


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    language: str
    info: str
    code: str
    runnable: bool
    apart: str | None = None  # "install" or "http": run by a test of its own

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
        apart = APART.match(previous)
        runnable = previous != NO_RUN and apart is None and "no-run" not in info.split()
        found.append(Block(str(path), start + 1, language, info, "\n".join(body) + "\n",
                           runnable, apart.group("kind") if apart else None))
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


def command_name(args: list[str]) -> str | None:
    """The command word of ``hailq ARGS``, skipping group options (``--url URL``)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--url":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def run_page(page: Path, script: str) -> None:
    """Run every runnable block of ``page`` in the current directory; raise on failure.

    ``script`` is the ``hailq`` console script that ``$ hailq ...`` lines run."""
    sys.path.insert(0, os.getcwd())
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in blocks(page):
        if not block.runnable:
            continue
        if block.language == "python" and block.title and block.title.endswith(".py"):
            Path(block.title).write_text(block.code, encoding="utf-8")
            continue
        if block.language == "python":
            checked = _CheckedPrint(block)
            namespace["print"] = checked
            try:
                exec(compile(block.code, block.where(), "exec"), namespace)
            except SampleFailed:
                raise
            except BaseException:
                raise SampleFailed(block, traceback.format_exc()) from None
            checked.verify()
        elif block.language == "console":
            for command in console_commands(block):
                if not command.startswith("hailq "):
                    _run_shell(block, command)
                    continue
                args = shlex.split(command, comments=True)[1:]
                if command_name(args) == "worker":
                    run_worker(block, command, [script, *args])
                    continue
                code, out, err = _hailq(script, args)
                if code != 0:
                    raise SampleFailed(block, f"$ {command}\nexit {code}\n{out}{err}")


def _hailq(script: str, args: list[str]) -> tuple[int, str, str]:
    """Run ``hailq ARGS`` in a process of its own: forked from the tests' CLI server
    (``tests/zygote.py``) where there is one, else the console script."""
    if not os.environ.get("HAILQ_TEST_SUBPROCESS"):
        try:
            from zygote import ZYGOTE
        except ImportError:  # run as a script, outside the test suite
            pass
        else:
            return ZYGOTE.run(args, dict(os.environ), os.getcwd(), None, 120)
    done = subprocess.run([script, *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


class _CheckedPrint:
    """``print`` for one block: a line ``print(...)  # -> VALUE`` must print ``VALUE``."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.expected: dict[int, str] = {}
        for number, line in enumerate(block.code.splitlines(), start=1):
            match = EXPECT.match(line)
            if match:
                self.expected[number] = match.group("expected").strip()
        self.printed: set[int] = set()

    def __call__(self, *args: object, **kwargs: Any) -> None:
        builtins.print(*args, **kwargs)
        caller = sys._getframe(1)
        line = caller.f_lineno
        if caller.f_code.co_filename != self.block.where() or line not in self.expected:
            return
        buffer = io.StringIO()
        sep = kwargs.get("sep")
        builtins.print(*args, sep=" " if sep is None else sep, end="", file=buffer)
        self.printed.add(line)
        output, expected = buffer.getvalue().strip(), self.expected[line]
        if not _states(expected, output):
            raise SampleFailed(self.block, f"line {line} of the block printed {output!r}; "
                                           f"its comment says {expected!r}")

    def verify(self) -> None:
        never = sorted(set(self.expected) - self.printed)
        if never:
            raise SampleFailed(self.block, f"line(s) {never} of the block have '# -> ...' "
                                           "but never printed")


def _states(comment: str, output: str) -> bool:
    """Whether ``comment`` is ``output``, alone or followed by ``: prose`` or ``, prose``."""
    return comment == output or any(comment.startswith(output + sep) for sep in (": ", ", "))


def run_worker(block: Block, command: str, argv: list[str]) -> None:
    """Run ``hailq worker ...`` until it is registered as running and its queues have
    nothing ready (so it took what the page sent), then SIGTERM it: exit code 0 expected."""
    # Appending: the worker shares the file offset that reading here moves.
    with tempfile.TemporaryFile("a+", encoding="utf-8") as log:
        worker = _BackgroundWorker(block, command, argv, log)
        try:
            with hailq.connect(_option(argv, "--url")) as broker:
                queues = worker.wait_running(broker)
                worker.wait_idle(broker, queues)
        except hailq.HailqError as exc:
            raise worker.failed(f"{type(exc).__name__}: {exc}") from None
        worker.stop()


class _BackgroundWorker:
    def __init__(self, block: Block, command: str, argv: list[str], log: IO[str]) -> None:
        self.block, self.command, self.log = block, command, log
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)

    def failed(self, why: str) -> SampleFailed:
        """Kill the worker if it still runs; the failure with its output."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.log.seek(0)
        return SampleFailed(self.block, f"$ {self.command}\n{why}\n{self.log.read()[-4000:]}")

    def wait_running(self, broker: hailq.Broker) -> set[str]:
        """The queues of the worker (or, with ``--pool process``, of its children) once
        one of them is registered as running."""
        deadline = time.monotonic() + WORKER_START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise self.failed(f"exit {self.process.returncode} before it was "
                                  "registered as running")
            pids = _family(self.process.pid)
            mine = [w for w in broker.workers() if w.state == "running" and w.pid in pids]
            # A worker records "running" a moment before its SIGTERM handler is in place;
            # its log line "worker ... consuming ..." comes after.
            if mine and self._logged(" consuming "):
                return {q for w in mine for q in w.queues}
            if time.monotonic() > deadline:
                raise self.failed(f"not registered as running within "
                                  f"{WORKER_START_TIMEOUT:.0f} s")
            time.sleep(0.1)

    def _logged(self, text: str) -> bool:
        self.log.seek(0)
        return text in self.log.read()

    def wait_idle(self, broker: hailq.Broker, queues: set[str]) -> None:
        """Wait until none of ``queues`` has a message ready: the worker took them all."""
        deadline = time.monotonic() + WORKER_WORK_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise self.failed(f"exit {self.process.returncode} while it should work")
            ready = {q: n for q in sorted(queues) if (n := broker.get_queue(q).stats().ready)}
            if not ready:
                return
            if time.monotonic() > deadline:
                raise self.failed(f"messages still ready after {WORKER_WORK_TIMEOUT:.0f} s: "
                                  f"{ready}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM; the worker must drain and exit with code 0."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(WORKER_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise self.failed(f"still running {WORKER_STOP_TIMEOUT:.0f} s after "
                              "SIGTERM") from None
        if code != 0:
            raise self.failed(f"exit {code} after SIGTERM")


def _option(argv: list[str], name: str) -> str | None:
    """The value of ``name VALUE`` or ``name=VALUE`` in ``argv``."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _family(pid: int) -> set[int]:
    """``pid`` and its descendants (``--pool process`` children register themselves);
    only ``pid`` where there is no ``/proc``."""
    family = {pid}
    proc = Path("/proc")
    if not proc.is_dir():
        return family
    parents: dict[int, int] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # the process ended meanwhile
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in family and child not in family:
                family.add(child)
                grew = True
    return family


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
