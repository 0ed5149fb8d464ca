"""Schemathesis against ``/openapi.json`` of a running server, on SQLite and PostgreSQL:
for generated requests to every operation, no 5xx, and every response (status, content
type, body) as the document says."""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

import hailq

from .conftest import ADMIN, Server, Start

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection]


@pytest.fixture
def fuzzed(start: Start, broker: hailq.Broker) -> Server:
    """A server with something to find: a queue with live and dead messages, a topic."""
    q = broker.queue("jobs", max_attempts=1)
    q.send_many(["a", {"b": 1}, b"\x00\xff"])
    [m] = q.receive()
    m.nack(error="boom")
    broker.topic("orders").subscribe("billing")
    return start(max_wait=0.5)


def test_openapi_no_5xx_and_responses_match_the_schema(fuzzed: Server) -> None:
    """Positive and negative (schema-violating) requests to every operation, a few each:
    bounded so the run takes well under a minute per backend."""
    auth = {"Authorization": f"Bearer {ADMIN}"}
    schema = schemathesis.openapi.from_url(f"{fuzzed.base}/openapi.json", headers=auth)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 30
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis.settings(max_examples=10, deadline=None, database=None,
                                 suppress_health_check=list(hypothesis.HealthCheck),
                                 phases=[hypothesis.Phase.generate])
            def run(case: schemathesis.Case) -> None:
                case.call_and_validate(base_url=fuzzed.base, checks=CHECKS, headers=auth)

            try:
                run()
            except hypothesis.errors.Unsatisfiable:
                # Nothing to get wrong: an operation with no parameters and no body.
                assert mode is GenerationMode.NEGATIVE, operation.label
                assert not operation.body and not list(operation.iter_parameters()), \
                    operation.label
