"""Django configured once per test process (its settings can be set only once): the
databases of the first call, later calls adding theirs to the same settings."""

from __future__ import annotations

from typing import Any


def configure(databases: dict[str, dict[str, Any]]) -> None:
    import django
    from django.conf import settings
    from django.db import connections

    if not settings.configured:  # Django needs a default database: the first given
        databases = {"default": next(iter(databases.values())), **databases}
        settings.configure(DATABASES=databases, USE_TZ=True, INSTALLED_APPS=[])
        django.setup()
        return
    for alias, config in databases.items():  # a later test's own databases
        settings.DATABASES[alias] = config
        connections.settings[alias] = connections.configure_settings(
            {"default": settings.DATABASES["default"], alias: config})[alias]
        if hasattr(connections._connections, alias):
            delattr(connections._connections, alias)
