"""A fork server for the CLI tests: each ``hailq`` command still runs in a process of its
own, with its own argv, environment, working directory, stdin, stdout, stderr and exit
status, but forked from a process that has already imported the CLI, so that a test
does not pay Python's start and hailq's imports (about half a second) per command.

The server is a plain ``python tests/zygote.py FD`` process: it imports ``hailq.cli.main``
and nothing else, opens no connection and starts no thread (so a fork inherits nothing
that hailq's rule 28 forbids), then serves requests on the Unix socket FD: a JSON request
(args, env, cwd) with three descriptors (stdin, stdout, stderr); it forks, answers the
child's pid, waits for it, and answers its exit code. The child runs the CLI's own
``main()`` and exits through the interpreter's normal exit (atexit handlers run).

``run`` is the client side, used by ``tests/cli/conftest.py::run_hailq``; set
``HAILQ_TEST_SUBPROCESS=1`` to run every command as a fresh ``python -m`` instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

MAX_REQUEST = 1 << 20


def _child(request: dict[str, object], fds: list[int]) -> None:
    for target, fd in zip((0, 1, 2), fds, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(request["cwd"]))
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False,  # noqa: SIM115
                      errors="backslashreplace")
    args = request["args"]
    assert isinstance(args, list)
    sys.argv = [sys.argv[0], *map(str, args)]
    from hailq.cli.main import main

    main()  # raises SystemExit: the interpreter exits as after ``python -m``


def serve(sock: socket.socket) -> None:
    while True:
        message, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 3)
        if not message:
            return
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            sock.close()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _child(request, fds)
            raise SystemExit(0)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        sock.send(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode())


class Zygote:
    """The client: one server per test process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._server: subprocess.Popen[bytes] | None = None

    def _start(self) -> socket.socket:
        if self._sock is not None and self._server is not None \
                and self._server.poll() is None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
        self._server = subprocess.Popen(
            [sys.executable, str(Path(__file__)), str(theirs.fileno())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self._sock = ours
        return ours

    def run(self, args: list[str], env: dict[str, str], cwd: str, stdin: str | None,
            timeout: float) -> tuple[int, str, str]:
        with self._lock:
            sock = self._start()
            fin_r, fin_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            request = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
            socket.send_fds(sock, [request], [fin_r, out_w, err_w])
            for fd in (fin_r, out_w, err_w):
                os.close(fd)
            pid = json.loads(sock.recv(MAX_REQUEST))["pid"]
            out: list[bytes] = []
            err: list[bytes] = []
            readers = [threading.Thread(target=_drain, args=(fd, into), daemon=True)
                       for fd, into in ((out_r, out), (err_r, err))]
            for reader in readers:
                reader.start()
            # A command that reads no stdin may have exited before it is written.
            with open(fin_w, "wb") as feed, contextlib.suppress(BrokenPipeError):
                feed.write((stdin or "").encode())
            sock.settimeout(timeout)
            try:
                code = json.loads(sock.recv(MAX_REQUEST))["code"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                sock.settimeout(None)
                sock.recv(MAX_REQUEST)
                raise subprocess.TimeoutExpired(["hailq", *args], timeout) from None
            finally:
                sock.settimeout(None)
            for reader in readers:
                reader.join()
            return code, b"".join(out).decode(), b"".join(err).decode()


def _drain(fd: int, into: list[bytes]) -> None:
    with open(fd, "rb") as stream:
        while chunk := stream.read1(65536):
            into.append(chunk)


ZYGOTE = Zygote()


if __name__ == "__main__":
    # The imports every command pays, paid once.
    import hailq.backends.sqlite.backend
    import hailq.cli.main
    import hailq.cli.output

    with contextlib.suppress(ImportError):  # the postgres extra
        import hailq.backends.postgres.backend  # noqa: F401

    assert threading.active_count() == 1, "the server must not fork a threaded process"
    serve(socket.socket(fileno=int(sys.argv[1])))
