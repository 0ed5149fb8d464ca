"""Schemathesis against ``/openapi.json`` of a running server, on SQLite and PostgreSQL:
generated requests to every operation, valid and invalid ones, under Schemathesis'
default checks: no 5xx; status, content type, headers and body as the document says;
valid data accepted and invalid data refused."""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from schemathesis import GenerationMode

import hailq

from .conftest import ADMIN, Server, Start

# What uvicorn itself answers to bytes that are no HTTP request (a negative case may
# send a header without a name): the app never sees them.
NOT_HTTP = "Invalid HTTP request received."


@pytest.fixture
def fuzzed(start: Start, broker: hailq.Broker) -> Server:
    """A server with something to find: a queue with live and dead messages, a topic."""
    q = broker.queue("jobs", max_attempts=1)
    q.send_many(["a", {"b": 1}, b"\x00\xff"])
    [m] = q.receive()
    m.nack(error="boom")
    broker.topic("orders").subscribe("billing")
    return start(max_wait=0.5)


@pytest.mark.slow  # a long scenario: .ci/run runs it after make test
def test_openapi_no_5xx_and_responses_match_the_schema(fuzzed: Server) -> None:
    """Positive and negative (schema-violating) requests to every operation, a few each:
    bounded so the run takes well under a minute per backend."""
    auth = {"Authorization": f"Bearer {ADMIN}"}
    schema = schemathesis.openapi.from_url(f"{fuzzed.base}/openapi.json", headers=auth)
    # A queue the run declares with a tiny max_message_size answers a later send with
    # 413, whether the rest of it was valid or not: too large for that queue's setting.
    for check in (schema.config.checks.positive_data_acceptance,
                  schema.config.checks.negative_data_rejection):
        check.expected_statuses = [*check.expected_statuses, "413"]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 30
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _fuzz(operation, mode, fuzzed.base, auth)
            except hypothesis.errors.Unsatisfiable:
                # Nothing to get wrong: an operation with no parameters and no body.
                assert mode is GenerationMode.NEGATIVE, operation.label
                assert not operation.body and not list(operation.iter_parameters()), \
                    operation.label


def _fuzz(operation: schemathesis.APIOperation, mode: GenerationMode, base: str,
          auth: dict[str, str]) -> None:
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(max_examples=15, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck),
                         phases=[hypothesis.Phase.generate])
    def run(case: schemathesis.Case) -> None:
        # The one rule of a valid body that JSON Schema cannot state: a retry policy's
        # base must not exceed its max (400 when it does).
        hypothesis.assume(mode is GenerationMode.NEGATIVE or _retry_in_order(case.body))
        response = case.call(base_url=base, headers=auth)
        if response.status_code == 400 and response.text == NOT_HTTP:
            return
        case.validate_response(response, headers=auth)

    run()

def _retry_in_order(body: object) -> bool:
    settings = body.get("settings", body) if isinstance(body, dict) else None
    retry = settings.get("retry") if isinstance(settings, dict) else None
    if not isinstance(retry, dict):
        return True
    return bool(retry.get("base", 1.0) <= retry.get("max", 300.0))
