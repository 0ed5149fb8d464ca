"""A real ``hailq serve`` app on uvicorn, on a free port, for each test, on each backend
(the ``broker`` fixture of tests/conftest.py), and httpx clients with each role."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

import hailq
from hailq.serve import Tokens, create_app
from hailq.serve.app import close_app
from needs import unavailable
from ports import free_port
from waiting import wait_until

ADMIN = "admin-token-for-tests"
READ = "read-token-for-tests"
CLIENT = "client-token-for-tests"


@dataclass
class Server:
    """A running server: its base URL and a client factory per role."""

    base: str
    broker: hailq.Broker
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, token: str | None = ADMIN, **options: Any) -> httpx.Client:
        headers = dict(options.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        made = httpx.Client(base_url=self.base, headers=headers, timeout=60, **options)
        self.clients.append(made)
        return made


class Running:
    """uvicorn serving ``app`` in a thread until ``stop``."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning",
                                access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started or not self.thread.is_alive(), 30)
        if not self.server.started:
            raise RuntimeError("the test server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


Start = Callable[..., Server]


@pytest.fixture
def start(broker: hailq.Broker) -> Iterator[Start]:
    """Start a server for ``broker``; options go to ``create_app``."""
    running: list[tuple[Running, Server, Any]] = []

    def run(**options: Any) -> Server:
        options.setdefault("tokens", Tokens((ADMIN,), (READ,), (CLIENT,)))
        app = create_app(broker, **options)
        r = Running(app)
        s = Server(f"http://127.0.0.1:{r.port}", broker)
        running.append((r, s, app))
        return s

    yield run
    for r, s, app in running:
        for c in s.clients:
            c.close()
        r.stop()
        close_app(app)


@pytest.fixture
def server(start: Start) -> Server:
    return start()


@pytest.fixture
def admin(server: Server) -> httpx.Client:
    return server.client(ADMIN)


# -- a real headless Chromium, for the browser tests ------------------------------------

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's ``/usr/bin/chromium`` driven by Playwright (no browser download)."""
    if not os.path.exists(CHROMIUM):
        unavailable(f"{CHROMIUM} is missing (apt-get install chromium)",
                    "the dashboard's browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def open_page(chromium: Any, server: Server) -> Iterator[Callable[..., Any]]:
    """A fresh browser context logged in with a token (admin unless told)."""
    contexts: list[Any] = []

    def open_(path: str = "/", token: str = ADMIN) -> Any:
        context = chromium.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{server.base}/login?token={token}")
        if path != "/":
            page.goto(server.base + path)
        return page

    yield open_
    for context in contexts:
        context.close()
