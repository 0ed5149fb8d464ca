"""A FastAPI app whose endpoint stores a claim and sends its check in one transaction.

``POST /claims`` with ``{"claim": 8311, "photos": 4}`` inserts the claim's row and
sends ``{"claim": 8311}`` to the queue ``checks`` in the same async SQLAlchemy
transaction: the message exists if and only if the claim does (hailq's rule 3). A
claim without photos is refused after both were written, and leaves neither.

hailq is used through ``hailq.aio``: the broker is connected when the app starts
(its lifespan) and closed when it stops. The application's database must be hailq's
own (the same SQLite file, or the same PostgreSQL database). Run it with ``uvicorn``
after ``create_app(...)``; the tests call it through httpx's ASGI transport, inside
its lifespan (tests/examples/test_fastapi_claims.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

import hailq.aio


class Claim(BaseModel):
    claim: int
    photos: int


def immediate(engine: AsyncEngine) -> None:
    """SQLite: open every transaction IMMEDIATE. A deferred one (the driver's default)
    that read first cannot take the write lock while another connection writes, and
    fails with "database is locked" where nobody can retry it."""
    @event.listens_for(engine.sync_engine, "connect")
    def _no_implicit_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's

    @event.listens_for(engine.sync_engine, "begin")
    def _begin_immediate(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_app(database_url: str, hailq_url: str) -> FastAPI:
    """The app, on ``database_url`` (SQLAlchemy's async URL of hailq's database)."""
    engine = create_async_engine(database_url)
    if engine.dialect.name == "sqlite":
        immediate(engine)
    sessions = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with hailq.aio.connect(hailq_url) as broker:  # closed when the app stops
            app.state.checks = await broker.queue("checks")
            yield

    app = FastAPI(lifespan=lifespan)
    app.state.engine = engine

    @app.post("/claims", status_code=201)
    async def create_claim(claim: Claim) -> dict[str, Any]:
        async with sessions() as db, db.begin():  # commits at the end of the block
            await db.execute(text("INSERT INTO claims (id, photos) VALUES (:id, :photos)"),
                             {"id": claim.claim, "photos": claim.photos})
            checks: hailq.aio.AsyncQueue = app.state.checks
            message_id = await checks.send({"claim": claim.claim}, connection=db)
            if claim.photos == 0:  # rolls back the claim and its message together
                raise HTTPException(422, "a claim needs at least one photo")
        return {"claim": claim.claim, "message": message_id}

    return app


async def create_tables(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE IF NOT EXISTS claims "
                                "(id INTEGER PRIMARY KEY, photos INTEGER NOT NULL)"))
