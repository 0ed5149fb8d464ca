"""The async PostgreSQL driver's own parts: ``LoopConnection`` (psycopg's
``AsyncConnection`` keeping its socket registered with the loop between statements)
and the greenlets ``spawn`` keeps between calls. What must hold: answers reach the
right statement, a lost connection or an interrupted statement leaves no registration
behind (a closed socket's number is soon another socket's), and a kept greenlet
carries nothing of one call into the next."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import weakref
from typing import Any

import psycopg
import pytest

from conftest import PG_URL, require_postgres

pytest.importorskip("greenlet")

from hailq.aio.greenlets import await_only, spawn
from hailq.aio.pgconn import LoopConnection


@pytest.fixture(autouse=True)
def _postgres() -> None:
    require_postgres()


async def _connect() -> LoopConnection:
    return await LoopConnection.connect(PG_URL, autocommit=True)


async def _one(conn: psycopg.AsyncConnection[Any], query: str, params: Any = None) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    assert row is not None
    return row[0]


def test_concurrent_statements_on_several_connections_get_their_own_answers() -> None:
    async def scenario() -> None:
        conns = [await _connect() for _ in range(3)]

        async def run(conn: LoopConnection, base: int) -> list[int]:
            return [await _one(conn, "SELECT %s::int * 2", (base + i,)) for i in range(40)]

        try:
            results = await asyncio.gather(*(run(c, 1000 * n) for n, c in enumerate(conns)))
            assert results == [[2 * (1000 * n + i) for i in range(40)] for n in range(3)]
        finally:
            for conn in conns:
                await conn.close()

    asyncio.run(scenario())


def test_a_statement_too_long_for_one_write_and_the_next_ones() -> None:
    async def scenario() -> None:
        conn = await _connect()
        try:
            big = "x" * 8_000_000  # more than a socket takes at once: psycopg waits to write
            assert await _one(conn, "SELECT length(%s::text)", (big,)) == len(big)
            assert await _one(conn, "SELECT 41 + 1") == 42
            assert await _one(conn, "SELECT length(%s::text)", (big,)) == len(big)
        finally:
            await conn.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("noticed", ["by a statement", "by the loop, idle"])
def test_a_connection_the_server_ends_leaves_no_reader_on_its_socket(noticed: str) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        conn = await _connect()
        other = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
        try:
            assert await _one(conn, "SELECT 1") == 1
            fd = conn.pgconn.socket
            await other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
            if noticed == "by a statement":
                with pytest.raises(psycopg.OperationalError):
                    for _ in range(50):  # until the end reaches the client
                        await _one(conn, "SELECT 1")
                        await asyncio.sleep(0.1)
            else:  # the loop sees the socket readable with nobody waiting
                for _ in range(100):
                    if conn._watched_by is None:
                        break
                    await asyncio.sleep(0.05)
                assert conn._watched_by is None
            # Nothing registered for the number libpq closed (it returns False then).
            assert not loop.remove_reader(fd)
        finally:
            await conn.close()
            await other.close()

    asyncio.run(scenario())


def test_a_cancelled_statement_is_cancelled_on_the_server_and_the_connection_goes_on(
        ) -> None:
    async def scenario() -> None:
        conn = await _connect()
        try:
            assert await _one(conn, "SELECT 1") == 1
            task = asyncio.ensure_future(conn.execute("SELECT pg_sleep(30)"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert await _one(conn, "SELECT 7") == 7
        finally:
            await conn.close()

    asyncio.run(scenario())


def test_a_closed_connection_leaves_no_reader() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        conn = await _connect()
        assert await _one(conn, "SELECT 1") == 1
        fd = conn.pgconn.socket
        await conn.close()
        assert not loop.remove_reader(fd)

    asyncio.run(scenario())


_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


class _Boom(Exception):
    pass


def test_kept_greenlets_start_each_call_afresh() -> None:
    def set_and_read() -> str:
        before = _seen.get()
        _seen.set("set by a call")
        return before

    def fail() -> None:
        raise _Boom("from the call")

    async def scenario() -> None:
        assert await spawn(set_and_read) == "unset"
        assert await spawn(set_and_read) == "unset"  # a kept greenlet: no context kept
        with pytest.raises(_Boom) as caught:
            await spawn(fail)
        error = weakref.ref(caught.value)
        del caught
        gc.collect()
        assert error() is None  # the failed call's exception is not kept by a greenlet
        assert await spawn(lambda: await_only(asyncio.sleep(0, "awaited"))) == "awaited"

    asyncio.run(scenario())


def test_calls_in_flight_at_once_each_get_their_own_result() -> None:
    def call(n: int) -> int:
        await_only(asyncio.sleep(0.01 * (n % 3)))
        return n * n

    async def scenario() -> None:
        for _ in range(2):  # the second round on greenlets the first one left
            assert await asyncio.gather(*(spawn(call, n) for n in range(100))) == [
                n * n for n in range(100)]

    asyncio.run(scenario())


def test_an_untested_psycopg_release_gets_psycopg_s_own_connection(
        monkeypatch: pytest.MonkeyPatch, pg_url: str) -> None:
    import hailq.aio
    from hailq.aio import pgconn

    assert pgconn.connection_class() is LoopConnection  # the release installed here
    monkeypatch.setattr(psycopg, "__version__", "3.4.0")  # whose wait may differ
    assert pgconn.connection_class() is psycopg.AsyncConnection

    async def main() -> list[Any]:
        async with hailq.aio.connect(pg_url) as broker:
            q = await broker.queue("claims")
            await q.send({"claim": 8311})
            [m] = await q.receive(wait=5)
            await m.ack()
            return [m.body, (await q.stats()).in_flight]

    assert asyncio.run(main()) == [{"claim": 8311}, 0]
