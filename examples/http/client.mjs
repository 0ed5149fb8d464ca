// A producer and a consumer of hailq in Node (20 or later: global fetch), through
// `hailq serve`.
//
//   HAILQ_API=http://127.0.0.1:8642 HAILQ_TOKEN=... node client.mjs [QUEUE]
//
// HAILQ_TOKEN needs the client role (send, receive, ack); the queue must exist
// (`hailq send --create`, or PUT /api/queues/QUEUE with the admin role).

const api = process.env.HAILQ_API ?? "http://127.0.0.1:8642";
const token = process.env.HAILQ_TOKEN;
const queue = process.argv[2] ?? "emails";

async function call(method, path, body) {
  const response = await fetch(api + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) {
    // Every error is {"error": {"code", "message"}}.
    throw new Error(`${method} ${path}: ${response.status} ${data.error.code}: ${data.error.message}`);
  }
  return data;
}

export async function send(messages) {
  return (await call("POST", `/api/queues/${queue}/messages`, { messages })).ids;
}

export async function receive(maxMessages = 10, wait = 10) {
  const got = await call("POST", `/api/queues/${queue}/receive`,
                         { max_messages: maxMessages, wait });
  // Bytes arrive as body_base64, JSON values as body.
  return got.messages.map((m) => ({
    ...m, body: m.body_base64 !== undefined ? Buffer.from(m.body_base64, "base64") : m.body,
  }));
}

export async function ack(messages) {
  return (await call("POST", `/api/queues/${queue}/ack`,
                     { receipts: messages.map((m) => m.receipt) })).results;
}

if (!token) {
  console.error("set HAILQ_TOKEN to a token of hailq serve");
  process.exit(2);
}
const ids = await send([
  { body: { to: "ada@example.com", subject: "Welcome" }, headers: { source: "node" } },
  { body_base64: Buffer.from("hello from node").toString("base64"), priority: 5 },
]);
console.log("sent", ids.join(" "));
const messages = await receive();
for (const m of messages) {
  console.log("received", m.id, Buffer.isBuffer(m.body) ? m.body.toString() : JSON.stringify(m.body));
}
const results = await ack(messages);
console.log("acked", results.filter((r) => r.acked).length);
