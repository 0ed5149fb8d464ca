"""An asyncio consumer that writes each check's result to MariaDB exactly once.

Each message of the queue ``checks`` becomes one row of ``results`` in a MariaDB
database (not hailq's): the row and the message's id in hailq's inbox commit in one
transaction of an SQLAlchemy ``AsyncSession`` (aiomysql), so a redelivered message
(a lost ack, a crash before it) finds its id recorded and writes nothing again
(hailq's rule 21). hailq is used through ``hailq.aio``: a waiting receive holds no
thread, and the event loop never waits on a broker call.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

import hailq
import hailq.aio
from hailq.inbox import Inbox


def verdict(claim: int) -> str:
    return "hail damage, roof" if claim % 2 else "no damage found"


async def handle(message: hailq.aio.AsyncMessage,
                 sessions: async_sessionmaker[AsyncSession]) -> bool:
    """Store the message's result once; False when it was stored before."""
    async with sessions() as db, db.begin():
        if not await hailq.inbox(db, "results").record(message.id):
            return False  # a redelivery: its result is in already
        await db.execute(text("INSERT INTO results (claim, verdict) VALUES (:claim, :verdict)"),
                         {"claim": message.body["claim"],
                          "verdict": verdict(message.body["claim"])})
    return True


async def consume(checks: hailq.aio.AsyncQueue, sessions: async_sessionmaker[AsyncSession],
                  *, until_idle: bool = False) -> int:
    """Handle and ack messages; with ``until_idle``, stop when a wait finds none."""
    handled = 0
    while True:
        messages = await checks.receive(max_messages=10, wait=1)
        if not messages and until_idle:
            return handled
        for message in messages:
            handled += await handle(message, sessions)
            await message.ack()


async def create_tables(engine: AsyncEngine) -> None:
    """The results table and the inbox's, made outside any transaction of the
    consumer (on MariaDB a CREATE TABLE commits the transaction it is in)."""
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE IF NOT EXISTS results (claim INTEGER NOT NULL, "
                                "verdict VARCHAR(100) NOT NULL)"))
        await conn.execute(text(Inbox.ddl("mysql")))
