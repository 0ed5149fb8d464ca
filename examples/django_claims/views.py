"""A Django view that stores a claim and sends its check in ``transaction.atomic()``.

``POST /claims`` with ``{"claim": 8311, "photos": 4}`` inserts the claim's row and
sends ``{"claim": 8311}`` to the queue ``checks`` through Django's own connection,
inside the atomic block: both commit, or neither (hailq's rule 3). Settings:
``HAILQ_URL`` (hailq's database: the same SQLite file or PostgreSQL database as
Django's) and ``CLAIMS_DATABASE`` (the alias, "default" when unset). On SQLite, give
the database ``"OPTIONS": {"transaction_mode": "IMMEDIATE"}`` (Django 5.1+).
"""

from __future__ import annotations

import functools
import json

from django.conf import settings
from django.db import connections, transaction
from django.http import HttpRequest, JsonResponse

import hailq


class NoPhotos(Exception):
    """A claim must come with photos."""


@functools.cache
def broker(url: str) -> hailq.Broker:
    """The process's broker (opened once: opening it writes, so never inside a
    transaction of Django's on the same SQLite file)."""
    return hailq.connect(url)


@functools.cache
def _checks(url: str) -> hailq.Queue:
    return broker(url).queue("checks")


def create_claim(request: HttpRequest) -> JsonResponse:
    claim = json.loads(request.body)
    alias = getattr(settings, "CLAIMS_DATABASE", "default")
    connection = connections[alias]
    checks = _checks(settings.HAILQ_URL)  # before the transaction, see broker()
    try:
        with transaction.atomic(using=alias):
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO claims (id, photos) VALUES (%s, %s)",
                               (claim["claim"], claim["photos"]))
            message_id = checks.send({"claim": claim["claim"]}, connection=connection)
            if claim["photos"] == 0:
                raise NoPhotos  # leaves the atomic block: the claim and message roll back
    except NoPhotos:
        return JsonResponse({"error": "a claim needs at least one photo"}, status=422)
    return JsonResponse({"claim": claim["claim"], "message": message_id}, status=201)
