// Malformed JSON-RPC requests for the bridge fuzz: each one a valid request of some method, mutated
// one way (wrong types, bad bytes, odd framing, odd paths), built from a seeded generator so it replays.
import { randomUUID } from "node:crypto";
import type { Rng } from "../../../packages/server/test/fixtures/prng.js";
import { defaultLimits } from "../src/json-rpc-handler.js";
import type { RawRequest } from "./raw-http.js";

/** The bridge's body limit (the test stack keeps the default), which the size mutations are measured against. */
const { maxBodyBytes } = defaultLimits;

const v1Methods = [
  "SendMessage",
  "SendStreamingMessage",
  "GetTask",
  "ListTasks",
  "CancelTask",
  "SubscribeToTask",
  "CreateTaskPushNotificationConfig",
  "GetTaskPushNotificationConfig",
  "ListTaskPushNotificationConfigs",
  "DeleteTaskPushNotificationConfig",
  "GetExtendedAgentCard",
] as const;
const v03Methods = [
  "message/send",
  "message/stream",
  "tasks/get",
  "tasks/cancel",
  "tasks/resubscribe",
  "tasks/pushNotificationConfig/set",
  "tasks/pushNotificationConfig/get",
  "tasks/pushNotificationConfig/list",
  "tasks/pushNotificationConfig/delete",
  "agent/getAuthenticatedExtendedCard",
] as const;
const sseMethods = ["SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"];

/** Well-formed params for each method, the starting point of every mutation. */
function validParams(method: string, rng: Rng): Record<string, unknown> {
  const taskId = rng.pick(["task-that-does-not-exist", randomUUID()]);
  const contextId = `fuzz-${rng.int(0, 1e6)}`;
  switch (method) {
    case "SendMessage":
    case "SendStreamingMessage":
      return {
        message: {
          messageId: `m-${rng.int(0, 1e9)}`,
          role: "ROLE_USER",
          contextId,
          parts: [{ text: "hello" }, { data: { k: [1, 2] }, mediaType: "application/json" }],
          metadata: { tag: "fuzz" },
        },
        configuration: { acceptedOutputModes: ["text/plain"], historyLength: 2, returnImmediately: false },
        metadata: { origin: "fuzz" },
      };
    case "message/send":
    case "message/stream":
      return {
        message: {
          kind: "message",
          messageId: `m-${rng.int(0, 1e9)}`,
          role: "user",
          contextId,
          parts: [
            { kind: "text", text: "hello" },
            { kind: "data", data: { k: 1 } },
          ],
          metadata: { tag: "fuzz" },
        },
        configuration: { acceptedOutputModes: ["text/plain"], historyLength: 2, blocking: true },
      };
    case "GetTask":
    case "tasks/get":
      return { id: taskId, historyLength: 3 };
    case "ListTasks":
      return { contextId, status: "TASK_STATE_COMPLETED", pageSize: 5, pageToken: "", historyLength: 1 };
    case "CancelTask":
    case "SubscribeToTask":
    case "tasks/cancel":
    case "tasks/resubscribe":
    case "tasks/pushNotificationConfig/list":
      return { id: taskId };
    case "CreateTaskPushNotificationConfig":
      return { taskId, url: "http://127.0.0.1:9/hook", token: "t" };
    case "GetTaskPushNotificationConfig":
    case "DeleteTaskPushNotificationConfig":
      return { taskId, id: "cfg-1" };
    case "ListTaskPushNotificationConfigs":
      return { taskId, pageSize: 10 };
    case "tasks/pushNotificationConfig/set":
      return { taskId, pushNotificationConfig: { url: "http://127.0.0.1:9/hook", token: "t" } };
    case "tasks/pushNotificationConfig/get":
      return { id: taskId, pushNotificationConfigId: "cfg-1" };
    case "tasks/pushNotificationConfig/delete":
      return { id: taskId, pushNotificationConfigId: "cfg-1" };
    default:
      return {};
  }
}

type Path = (string | number)[];

function pathsOf(value: unknown, prefix: Path = []): Path[] {
  if (value === null || typeof value !== "object") return [];
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value as Record<string, unknown>);
  return entries.flatMap(([k, v]) => [[...prefix, k], ...pathsOf(v, [...prefix, k])]);
}

function setAt(root: Record<string, unknown>, path: Path, value: unknown): Record<string, unknown> {
  const copy = structuredClone(root);
  let node = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]!] = value;
  return copy;
}

const wrongValues: readonly unknown[] = [
  42,
  -7,
  1.5,
  1e300,
  "text",
  "",
  true,
  null,
  [],
  {},
  [1, "two", null],
  { nested: { deeper: [true] } },
  "\u0000\uffff\ud800",
  "9".repeat(40),
];

export interface Generated extends RawRequest {
  readonly label: string;
  readonly category: string;
  /** The JSON-RPC id the answer must carry, when the body is an envelope the bridge can read it from. */
  readonly expectId?: string | number | null;
  /** For a single wrong-typed field: the keys on its path, one of which an invalid-params answer must name. */
  readonly mutatedKeys?: readonly string[];
}

function versionHeaders(rng: Rng, method: string): [string, string][] {
  const own = (v03Methods as readonly string[]).includes(method) ? "0.3" : "1.0";
  const version = rng.chance(0.85) ? own : rng.pick(["0.3", "1.0", "2.0", "", "banana"]);
  if (version === "0.3" && rng.chance(0.5)) return [];
  return [["A2A-Version", version]];
}

function pickMethod(rng: Rng): string {
  return rng.chance(0.5) ? rng.pick(v1Methods) : rng.pick(v03Methods);
}

function envelope(id: unknown, method: unknown, params: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
}

function deep(depth: number): string {
  return `${'{"a":['.repeat(depth)}1${"]}".repeat(depth)}`;
}

export function generate(rng: Rng, index: number): Generated {
  const method = pickMethod(rng);
  const id = rng.pick<string | number>([index, `req-${index}`, 0, "dup", 7]);
  const headers: [string, string][] = [["Content-Type", "application/json"], ...versionHeaders(rng, method)];
  const path = rng.pick(["/", "/", "/", "/agents/echo/"]);
  const base = { method: "POST", path, headers, mode: "whole" as const };
  const json = (category: string, text: string, extra: Partial<Generated> = {}): Generated => ({
    ...base,
    category,
    label: `#${index} ${category} ${method}`,
    body: Buffer.from(text),
    ...extra,
  });
  const params = validParams(method, rng);
  switch (rng.int(0, 16)) {
    case 0:
      return json("valid", envelope(id, method, params), { expectId: id });
    case 1:
      return json("random-bytes", "", { body: Buffer.from(rng.bytes(rng.int(0, 2048))) });
    case 2: {
      const text = Buffer.from(envelope(id, method, params));
      const at = rng.int(1, text.length - 1);
      const bad = Buffer.from(rng.pick([[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0x80]]));
      return json("invalid-utf8", "", { body: Buffer.concat([text.subarray(0, at), bad, text.subarray(at)]) });
    }
    case 3:
    case 4: {
      const paths = pathsOf(params);
      if (paths.length === 0) return json("wrong-type-params", envelope(id, method, rng.pick(wrongValues)));
      const target = rng.pick(paths);
      const mutated = setAt(params, target, rng.pick(wrongValues));
      return json("wrong-type-field", envelope(id, method, mutated), {
        expectId: id,
        mutatedKeys: target.filter((k): k is string => typeof k === "string"),
        label: `#${index} wrong-type-field ${method} ${target.join(".")}`,
      });
    }
    case 5: {
      // Eight bytes a level: the deepest stays under the body limit, so the depth check is what refuses it.
      const depth = rng.chance(0.5) ? rng.int(1, 60) : rng.int(65, 120_000);
      return json(
        "deep-nesting",
        `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"${method}","params":{"x":${deep(depth)}}}`,
      );
    }
    case 6: {
      // Under the body limit but far over what one text part or id may hold.
      const size = rng.int(100_000, maxBodyBytes - 4_096);
      const huge = "h".repeat(size);
      const where = rng.pick(["text", "id", "messageId", "method"]);
      if (where === "method") return json("huge-within-limit", envelope(id, huge, params));
      const p =
        where === "text" && "message" in params
          ? setAt(params, ["message", "parts", 0], method.includes("/") ? { kind: "text", text: huge } : { text: huge })
          : setAt(params, ["message" in params ? "message" : "id"], where === "messageId" ? { messageId: huge } : huge);
      return json("huge-within-limit", envelope(id, method, p), { expectId: id });
    }
    case 7: {
      const body = Buffer.from(envelope(id, method, { pad: "o".repeat(maxBodyBytes + rng.int(1, 200_000)) }));
      return json("over-limit", "", { body, mode: rng.chance(0.5) ? "whole" : "chunked" });
    }
    case 8: {
      const where = rng.int(0, 2);
      const unknown = { [`zz_${rng.int(0, 999)}`]: rng.pick(wrongValues) };
      const text =
        where === 0
          ? JSON.stringify({ jsonrpc: "2.0", id, method, params, ...unknown })
          : where === 1
            ? envelope(id, method, { ...params, ...unknown })
            : envelope(
                id,
                method,
                "message" in params ? setAt(params, ["message", "colour"], "red") : { ...params, ...unknown },
              );
      return json("unknown-fields", text, { expectId: id });
    }
    case 9:
      // Duplicate keys: JSON.parse keeps the last, so that is the id to answer with.
      return json(
        "duplicate-ids",
        `{"jsonrpc":"2.0","id":"first","method":"${method}","id":${JSON.stringify(id)},"params":${JSON.stringify(params)}}`,
        { expectId: id },
      );
    case 10: {
      const text = Buffer.from(envelope(id, method, params));
      return json("truncated", "", {
        body: text.subarray(0, rng.int(0, text.length - 1)),
        mode: "truncated",
        missing: rng.int(1, 10_000),
      });
    }
    case 11: {
      const text = Buffer.from(envelope(id, method, rng.chance(0.5) ? params : setAt(params, [], {})));
      const cuts = Array.from({ length: rng.int(1, 5) }, () => rng.int(1, text.length - 1)).sort((a, b) => a - b);
      return json("slow-body", "", { body: text, mode: "slow", cuts, expectId: id });
    }
    case 12: {
      const type = rng.pick([
        "text/plain",
        "application/xml",
        "multipart/form-data; boundary=x",
        "application/json; charset=utf-16",
        "",
        "*/*",
      ]);
      return {
        ...json("wrong-content-type", envelope(id, method, params), { expectId: id }),
        headers: [...headers.slice(1), ...(type ? ([["Content-Type", type]] as [string, string][]) : [])],
      };
    }
    case 13: {
      const card = rng.chance(0.3);
      const verb = card
        ? rng.pick(["POST", "PUT", "DELETE", "PATCH"])
        : rng.pick(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]);
      return {
        ...json("wrong-http-method", envelope(id, method, params)),
        method: verb,
        path: card ? rng.pick(["/.well-known/agent-card.json", "/agents/echo/.well-known/agent-card.json"]) : path,
      };
    }
    case 14: {
      const text = rng.pick([
        JSON.stringify({ jsonrpc: "1.0", id, method, params }),
        JSON.stringify({ jsonrpc: 2, id, method }),
        JSON.stringify({ jsonrpc: "2.0", id, method: rng.pick(wrongValues) }),
        JSON.stringify({ jsonrpc: "2.0", id, method: "" }),
        JSON.stringify({ jsonrpc: "2.0", id, method: "no/such/method" }),
        JSON.stringify({ jsonrpc: "2.0", id: rng.pick([{}, [], true, 1.5e300]), method }),
        JSON.stringify({ jsonrpc: "2.0", method, params }),
        JSON.stringify({ jsonrpc: "2.0", id, method, params: rng.pick(["str", 5, [1], true]) }),
        JSON.stringify([{ jsonrpc: "2.0", id, method, params }]),
        JSON.stringify(rng.pick([null, 1, "s", []])),
        "",
      ]);
      return json("bad-envelope", text);
    }
    case 15: {
      const sse = rng.pick(sseMethods);
      const good = validParams(sse, rng);
      const paths = pathsOf(good);
      const target = rng.pick(paths);
      const bad = rng.chance(0.3) ? good : setAt(good, target, rng.pick(wrongValues));
      return {
        ...json("sse-bad-params", envelope(id, sse, rng.chance(0.1) ? rng.pick(wrongValues) : bad), { expectId: id }),
        headers: [["Content-Type", "application/json"], ...versionHeaders(rng, sse)],
        label: `#${index} sse-bad-params ${sse} ${target.join(".")}`,
      };
    }
    default: {
      if (rng.chance(0.5)) {
        return {
          ...json("odd-path", envelope(id, method, params), { expectId: id }),
          path: rng.pick([
            "/nope",
            "/agents/nope/",
            "/agents/%ZZ/",
            "/agents/echo/extra",
            "/agents//",
            `/${"p".repeat(4000)}`,
          ]),
        };
      }
      const garbage = rng.pick([
        Buffer.from(rng.bytes(rng.int(1, 512))),
        Buffer.from("POST / HTTP/9.9\r\n\r\n"),
        Buffer.from("POST /\r\n\r\n"),
        Buffer.from("POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n"),
        Buffer.from("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        Buffer.from(`POST / HTTP/1.1\r\nX: ${"v".repeat(20_000)}\r\n\r\n`),
      ]);
      return { ...json("garbage-http", ""), body: garbage, mode: "garbage" };
    }
  }
}
