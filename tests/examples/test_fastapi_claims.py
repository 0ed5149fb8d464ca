"""examples/fastapi_claims: a request stores its claim and sends its message in one
async SQLAlchemy transaction, through hailq.aio; a failing request sends nothing. On
both backends, through httpx's ASGI transport (no network), inside the app's lifespan
(which connects the async broker and closes it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

import hailq


def _urls(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, str]:
    """hailq's URL and the app's async SQLAlchemy URL of the same database."""
    if backend == "sqlite":
        path = tmp_path / "claims.db"
        return f"sqlite:///{path}", f"sqlite+aiosqlite:///{path}"
    url = str(request.getfixturevalue("pg_url"))  # the app's table lands in its schema too
    schema = url.rsplit("schema=", 1)[1]
    return url, ("postgresql+psycopg://" + url.split("://", 1)[1].split("?")[0]
                 + f"?options=-csearch_path%3D{schema}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_request_sends_its_message_with_its_claim_and_a_failed_one_sends_nothing(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from fastapi_claims.app import create_app, create_tables

    hailq_url, database_url = _urls(backend, tmp_path, request)
    app = create_app(database_url, hailq_url)

    async def main() -> list[Any]:
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=transport, base_url="http://claims") as client:
            await create_tables(app.state.engine)  # in hailq's schema, made at startup
            ok = await client.post("/claims", json={"claim": 8311, "photos": 4})
            refused = await client.post("/claims", json={"claim": 8312, "photos": 0})
        async with app.state.engine.connect() as conn:
            rows = (await conn.exec_driver_sql("SELECT id FROM claims")).fetchall()
        await app.state.engine.dispose()
        return [ok, refused, [r[0] for r in rows]]

    ok, refused, claims = asyncio.run(main())
    assert ok.status_code == 201 and refused.status_code == 422
    assert claims == [8311]
    with hailq.connect(hailq_url) as broker:
        checks = broker.queue("checks")
        [message] = checks.receive(max_messages=10)
        assert message.body == {"claim": 8311} and message.id == ok.json()["message"]
        assert checks.stats().sent == 1
