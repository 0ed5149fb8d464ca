#!/bin/sh
# A producer and a consumer of hailq in plain shell: curl through `hailq serve`.
#
#   HAILQ_API=http://127.0.0.1:8642 HAILQ_TOKEN=... ./send_and_receive.sh [QUEUE]
#
# HAILQ_TOKEN needs the client role (send, receive, ack) once the queue exists; with
# the admin role the script declares the queue first. Needs only curl, grep and sed.
set -eu

api="${HAILQ_API:-http://127.0.0.1:8642}"
queue="${1:-emails}"
auth="Authorization: Bearer ${HAILQ_TOKEN:?set HAILQ_TOKEN to a token of hailq serve}"

call() {  # METHOD PATH [JSON]: print the response body; fail on an HTTP error
    curl --silent --show-error --fail-with-body -X "$1" -H "$auth" \
         -H "Content-Type: application/json" ${3:+--data "$3"} "$api$2"
}

# Declare the queue (admin only; a client token gets 403 and the queue must exist).
call PUT "/api/queues/$queue" '{"lease": 60, "max_attempts": 5}' >/dev/null 2>&1 || true

# Send one message, then a batch with a priority, an ordering key and bytes (base64).
call POST "/api/queues/$queue/messages" \
     '{"body": {"to": "ada@example.com", "subject": "Welcome"}, "headers": {"source": "shell"}}'
echo
call POST "/api/queues/$queue/messages" '{"messages": [
  {"body": {"to": "bob@example.com"}, "priority": 9, "ordering_key": "bob", "dedup_id": "bob-1"},
  {"body_base64": "aGVsbG8gZnJvbSBzaGVsbA==", "delay": 0}]}'
echo

# Receive (waiting up to 10 s for a message) and ack each one by its receipt.
received=$(call POST "/api/queues/$queue/receive" '{"max_messages": 10, "wait": 10}')
echo "$received"
receipts=$(printf '%s' "$received" | grep -o '"receipt":"[^"]*"' | sed 's/^"receipt"://' \
           | paste -sd, -)
if [ -n "$receipts" ]; then
    call POST "/api/queues/$queue/ack" "{\"receipts\": [$receipts]}"
    echo
fi
