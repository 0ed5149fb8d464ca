"""``hailq worker`` as users start it: the console script, in the folder of their module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hailq

from .support import wait_for

HAILQ = str(Path(sys.executable).with_name("hailq"))

CHECKERS = textwrap.dedent('''
    import sys
    from hailq import App

    app = App()

    @app.handler("claims", lease=30, max_attempts=5)
    def check(message):
        with open("checked.txt", "a") as out:
            out.write(f"{message.body['claim']}\\n")

    def single(message):
        with open("single.txt", "a") as out:
            out.write(f"{message.body}\\n")
''')


@pytest.mark.parametrize("target,queue,out", [("checkers:app", "claims", "checked.txt"),
                                              ("checkers:single", "single", "single.txt")])
def test_hailq_worker_imports_the_module_from_the_working_directory(
        url: str, tmp_path: Path, target: str, queue: str, out: str) -> None:
    (tmp_path / "checkers.py").write_text(CHECKERS)
    with hailq.connect(url) as broker:
        q = broker.queue(queue)
        ids = q.send_many([{"claim": 8311}, {"claim": 8312}] if queue == "claims"
                          else ["a", "b"])
        env = {k: v for k, v in os.environ.items() if k not in ("HAILQ_URL", "PYTHONPATH")}
        args = [HAILQ, "worker", target, "--url", url, "--concurrency", "2"]
        if queue == "single":
            args += ["--queue", "single"]
        log = (tmp_path / "worker.log").open("w")
        worker = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: q.stats().acked >= len(ids), timeout=30,
                     what=f"{len(ids)} messages handled by {target}")
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(30)
        assert code == 0, (tmp_path / "worker.log").read_text()
        lines = sorted((tmp_path / out).read_text().split())
        assert lines == (["8311", "8312"] if queue == "claims" else ["a", "b"])
        assert q.stats().ready == 0


def test_hailq_worker_json_writes_its_log_as_json_lines(sqlite_url: str,
                                                        tmp_path: Path) -> None:
    import json

    (tmp_path / "checkers.py").write_text(CHECKERS)
    env = {k: v for k, v in os.environ.items() if k not in ("HAILQ_URL", "PYTHONPATH")}
    with hailq.connect(sqlite_url) as broker:
        broker.queue("claims").send({"claim": 8311})
        worker = subprocess.Popen([HAILQ, "--json", "worker", "checkers:app", "--url",
                                   sqlite_url], cwd=tmp_path, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        wait_for(lambda: broker.queue("claims").stats().acked == 1, timeout=30,
                 what="the claim handled")
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    records = [json.loads(line) for line in err.splitlines()]
    messages = " | ".join(r["message"] for r in records)
    assert "consuming claims" in messages and "draining" in messages
    assert all(r["pid"] == worker.pid and r["logger"] == "hailq.worker" for r in records)
    assert {r["level"] for r in records} == {"INFO"}


def test_a_worker_on_a_new_database_says_it_created_one(tmp_path: Path) -> None:
    """A typo in the path or schema would leave workers waiting beside the real queue."""
    (tmp_path / "checkers.py").write_text(CHECKERS)
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("HAILQ_URL", "PYTHONPATH")}
    worker = subprocess.Popen([HAILQ, "worker", "checkers:app", "--url", url], cwd=tmp_path,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)

    def created() -> bool:
        with hailq.connect(url, migrate=False) as broker:
            return broker.schema_status()[0] > 0

    wait_for(created, timeout=30, what="the worker to create the schema")

    def running() -> bool:  # listed as running: a SIGTERM now means "drain"
        with hailq.connect(url, migrate=False) as broker:
            try:
                return any(w.state == "running" for w in broker.workers())
            except hailq.HailqError:  # its schema is still being made
                return False

    wait_for(running, timeout=30, what="the worker to run")
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "WARNING" in err and "created a new, empty one" in err and "typo.db" in err
