"""The statements of ``queries.sql`` rendered for one schema: its name, its
LISTEN/NOTIFY channel, whether leases and acks commit relaxed, and the variants some
statements have (a fused claim's, a retaining queue's claim, a send's re-run)."""

from __future__ import annotations

from psycopg import sql

from hailq.backends.sqlfile import load_queries

_RAW = load_queries("hailq.backends.postgres")
RELAXED = sql.SQL("(SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL")
# The claim both claim statements share (queries.sql: claim_steps) leaves out, in the
# fused one, the rows that statement acks (see message_ack_claim).
_ACKED_HERE = {"message_ack_claim": sql.SQL("AND id NOT IN (SELECT id FROM gone)")}
# Who runs each row (rule 40): one name for all, passed as one text value (``retain``),
# or a worker's slots (``retain slots``), the i-th name for the i-th row in the order
# picked took them (the order the caller gets them back in).
_MARKS = {
    "retain": sql.SQL(", retain = %(retain)s, consumer = %(consumer)s::text, "
                      "claimed_at = {schema}.epoch()"),
    "retain slots": sql.SQL(
        ", retain = %(retain)s, consumer = coalesce((%(consumer)s::text[])[array_position("
        "ARRAY(SELECT id FROM picked), m.id)], (%(consumer)s::text[])[1]), "
        "claimed_at = {schema}.epoch()"),
}


def render(schema: str, channel: str, relaxed: sql.Composable) -> dict[str, str]:
    """Every statement's text, by name, as the dialect runs it."""
    parts = {"schema": sql.Identifier(schema), "channel": sql.Literal(channel),
             "relaxed": relaxed, "limit": sql.SQL("{limit}"), "mark": sql.SQL("")}
    rendered = {name: sql.SQL(text).format(again=sql.SQL(""), acked_here=_ACKED_HERE.get(
                    name, sql.SQL("")), **parts).as_string(None)
                for name, text in _RAW.items()}
    # A claim of a queue that keeps history (rule 40) marks its rows; others' do not.
    for name in ("message_claim", "message_ack_claim"):
        for variant, mark in _MARKS.items():
            rendered[f"{name} {variant}"] = sql.SQL(_RAW[name]).format(
                again=sql.SQL(""), acked_here=_ACKED_HERE.get(name, sql.SQL("")),
                **{**parts, "mark": mark.format(schema=parts["schema"])}).as_string(None)
    # A batch's re-run (its first try's commit unknown) skips the rows that try stored;
    # a first try has no ids to skip and saves the speculative inserts ON CONFLICT makes.
    rendered["message_insert_again"] = sql.SQL(_RAW["message_insert"]).format(
        again=sql.SQL("ON CONFLICT (id) DO NOTHING"), **parts).as_string(None)
    return rendered
