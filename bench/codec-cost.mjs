// The engine's binary encoders alone against protobuf-es's toBinary, on the shapes one turn writes: the inbound
// message, the agent's reply with its chain report, the task record, and the stream events the run logs.
//
//   node bench/codec-cost.mjs [--root=DIR] [--rounds=N] [--ms=N]
//
// Each row encodes the same object with toBinary and, where the checkout at --root has one, with the engine's
// hand-written encoder (its engine/task-encoding.js, the message cache warm as in a turn; this checkout has none,
// so give --root an older build to compare), and prints the CPU time per call of each (the median of --rounds
// rounds of --ms each, with the lowest and highest) and that the two decode equal. PARLEY_CODEC_MODULE names the
// encoding module under --root when it is not where this script looks first.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { countFlag, loaderOf, parseFlags } from "./lib/embedded.mjs";

const args = parseFlags(process.argv.slice(2));
const root = resolve(args.root ?? new URL("..", import.meta.url).pathname);
const rounds = countFlag("codec-cost", "rounds", args.rounds, 7);
const ms = countFlag("codec-cost", "ms", args.ms, 300);
const load = loaderOf(root);
const require = createRequire(join(root, "package.json"));
const { create, equals, fromBinary, toBinary } = require("@bufbuild/protobuf");
const proto = await load("proto/dist/index.js");
const { MessageSchema, Role, StreamResponseSchema, TaskSchema, TaskState } = proto;

const candidates = [
  process.env.PARLEY_CODEC_MODULE,
  "packages/domain/dist/engine/task-encoding.js",
  "packages/server/dist/engine/task-encoding.js",
].filter((p) => p !== undefined);
const modulePath = candidates.find((p) => existsSync(join(root, p)));
const { encodeEvent, encodeMessage, encodeTask } = modulePath === undefined ? {} : await load(modulePath);

const chain = { "https://parley.dev/ext/chain/v1": { id: crypto.randomUUID(), stepsLeft: 7, hopCount: 1 } };
const text = (value) => ({ content: { case: "text", value } });
const taskId = crypto.randomUUID();
const contextId = crypto.randomUUID();
const inbound = () =>
  create(MessageSchema, {
    messageId: crypto.randomUUID(),
    contextId,
    taskId,
    role: Role.USER,
    parts: [text("x".repeat(100))],
  });
const reply = () =>
  create(MessageSchema, {
    messageId: crypto.randomUUID(),
    contextId,
    taskId,
    role: Role.AGENT,
    parts: [text(`echo: ${"x".repeat(100)}`)],
    metadata: chain,
  });
const timestamp = { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 123_000_000 };
const artifact = { artifactId: "reply-1", name: "reply", parts: [text("chunk ".repeat(8))] };
const task = create(TaskSchema, {
  id: taskId,
  contextId,
  status: { state: TaskState.COMPLETED, timestamp, message: reply() },
  artifacts: [artifact],
  history: [inbound(), reply()],
  metadata: chain,
});
const event = (payload) => create(StreamResponseSchema, { payload });

/** Each row: the schema, objects to encode (new ones or one shared, as a turn has them), how the server encodes. */
const rows = [
  // A new message object each call: a message is encoded once, when it is stored (encodeMessage caches it).
  ["message (inbound, text)", MessageSchema, inbound, encodeMessage],
  ["message (reply, chain report)", MessageSchema, reply, encodeMessage],
  ["task (record, 2 in history)", TaskSchema, () => task, encodeTask],
  [
    "event: task snapshot",
    StreamResponseSchema,
    () => event({ case: "task", value: { ...task, status: { ...task.status, message: undefined } } }),
    encodeEvent,
  ],
  [
    "event: final status",
    StreamResponseSchema,
    () => event({ case: "statusUpdate", value: { taskId, contextId, status: task.status, metadata: chain } }),
    encodeEvent,
  ],
  [
    "event: artifact chunk",
    StreamResponseSchema,
    () => event({ case: "artifactUpdate", value: { taskId, contextId, artifact, append: true, lastChunk: false } }),
    encodeEvent,
  ],
];

/**
 * CPU microseconds per call of `encode`, for about `ms`, over objects `make` gives beforehand (a new batch for each
 * pass unless the row shares one object: a message is encoded once, when stored, and the cache must not answer).
 */
function perCall(make, shared, encode) {
  let objects = Array.from({ length: 256 }, make);
  let calls = 0;
  let used = 0;
  const wall = performance.now();
  while (performance.now() - wall < ms) {
    const start = process.cpuUsage();
    for (let i = 0; i < 256; i++) encode(objects[i]);
    const cpu = process.cpuUsage(start);
    used += cpu.user + cpu.system;
    calls += 256;
    if (!shared) objects = Array.from({ length: 256 }, make);
  }
  return used / calls;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (us) => `${(us * 1000).toFixed(0)} ns`;
console.log(
  `${modulePath ?? "no hand-written encoders"} at ${root}; ${rounds} rounds of ${ms} ms (median, lowest-highest)`,
);
for (const [name, schema, make, encode] of rows) {
  const sample = make();
  const shared = sample === make();
  const range = (xs) => `${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))}`;
  const lib = [];
  if (encode === undefined) {
    for (let r = 0; r < rounds; r++) lib.push(perCall(make, shared, (m) => toBinary(schema, m)));
    console.log(`${name.padEnd(30)} toBinary ${fmt(median(lib)).padStart(8)} (${range(lib)})`);
    continue;
  }
  const same = equals(schema, fromBinary(schema, encode(sample)), fromBinary(schema, toBinary(schema, sample)));
  const hand = [];
  for (let r = 0; r < rounds; r++) {
    // Alternating, so a busy moment on a shared machine falls on both sides.
    hand.push(perCall(make, shared, encode));
    lib.push(perCall(make, shared, (m) => toBinary(schema, m)));
  }
  console.log(
    `${name.padEnd(30)} server ${fmt(median(hand)).padStart(8)} (${range(hand)})  ` +
      `toBinary ${fmt(median(lib)).padStart(8)} (${range(lib)})  ` +
      `saves ${fmt(median(lib) - median(hand)).padStart(8)}  decode-equal ${same}`,
  );
}
