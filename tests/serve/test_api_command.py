"""``hailq serve``'s own socket."""

from __future__ import annotations

import asyncio
import socket

from hailq.cli.commands_serve import _bind


def test_served_connections_have_nagle_off() -> None:
    """asyncio turns Nagle off only on a socket that names IPPROTO_TCP; with it on, each
    small answer on a kept-alive connection waited 40 ms for the client's delayed ACK."""
    listening = _bind("127.0.0.1", 0)
    assert listening.proto == socket.IPPROTO_TCP
    port = listening.getsockname()[1]
    found: list[int] = []

    async def run() -> None:
        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            raw = writer.get_extra_info("socket")
            found.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listening)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(200):
                if found:
                    break
                await asyncio.sleep(0.05)
            writer.close()

    asyncio.run(run())
    assert found and found[0] != 0
