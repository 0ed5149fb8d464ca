"""examples/django_claims: the view stores its claim and sends its message inside
transaction.atomic(); a failing request sends nothing. On both backends, through
Django's test client, with settings made here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import hailq


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_view_sends_its_message_with_its_claim_and_a_failed_one_sends_nothing(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from django_claims import views

    from stacks.django_setup import configure

    alias = f"claims_{backend}"
    if backend == "sqlite":
        path = tmp_path / "claims.db"
        url = f"sqlite:///{path}"
        database: dict[str, Any] = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path),
                                    "OPTIONS": {"transaction_mode": "IMMEDIATE"}}
    else:
        url = str(request.getfixturevalue("pg_url"))
        database = {"ENGINE": "django.db.backends.postgresql", "NAME": "test",
                    "USER": "postgres", "HOST": "127.0.0.1", "PORT": "5432",
                    "OPTIONS": {"options": f"-c search_path={url.rsplit('schema=', 1)[1]}"}}
    broker = hailq.connect(url)
    configure({alias: database})
    from django.db import connections
    from django.test import Client, override_settings

    with connections[alias].cursor() as cursor:
        cursor.execute("CREATE TABLE claims (id INTEGER PRIMARY KEY, photos INTEGER NOT NULL)")
    with override_settings(ROOT_URLCONF="django_claims.urls", ALLOWED_HOSTS=["testserver"],
                           HAILQ_URL=url, CLAIMS_DATABASE=alias):
        client = Client()
        ok = client.post("/claims", json.dumps({"claim": 8311, "photos": 4}),
                         content_type="application/json")
        refused = client.post("/claims", json.dumps({"claim": 8312, "photos": 0}),
                              content_type="application/json")
    assert ok.status_code == 201 and refused.status_code == 422
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT id FROM claims")
        assert [r[0] for r in cursor.fetchall()] == [8311]
    connections[alias].close()
    checks = broker.queue("checks")
    [message] = checks.receive(max_messages=10)
    assert message.body == {"claim": 8311} and message.id == ok.json()["message"]
    assert checks.stats().sent == 1
    broker.close()
    views.broker(url).close()  # the view's own
