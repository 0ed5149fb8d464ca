"""``hailq serve``: the HTTP API (and the dashboard) in one ASGI app.

``create_app(broker, tokens=Tokens(admin=("...",)))`` builds it; ``hailq serve``
runs it with uvicorn. See docs/guides/http-api.md.
"""

from __future__ import annotations

from hailq.serve.app import create_app
from hailq.serve.security import Tokens

__all__ = ["Tokens", "create_app"]
