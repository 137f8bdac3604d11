// What the single-process bench scripts (turn-cost, alloc-cost, pg-turn-cost, held-streams) share: their flags,
// loading another checkout's build (--root), an embedded bridge in front of a Parley in the same process, one
// JSON-RPC POST, and a Parley with one send function on either path.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** `--key=value` flags (`--flag` alone is "true"). */
export function parseFlags(argv) {
  return Object.fromEntries(
    argv.map((a) => {
      const [k, v] = a.replace(/^--/, "").split("=");
      return [k, v ?? "true"];
    }),
  );
}

/**
 * The whole number a `--name=N` flag gave as `text` (at least `min`), or `fallback` without it; anything else stops
 * the run (exit 2) with a line that names `tool` and the flag.
 */
export function countFlag(tool, name, text, fallback, min = 1) {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(value) || value < min) {
    const bound = min === 1 ? "above 0" : `of at least ${min}`;
    process.stderr.write(`${tool}: --${name} must be a whole number ${bound}, got ${JSON.stringify(text)}\n`);
    process.exit(2);
  }
  return value;
}

const paths = ["bridge", "inproc", "grpc", "connect"];

/**
 * The `--path` flag of the scripts that send through startSendingParley: "bridge" (the default), "inproc", "grpc"
 * or "connect"; anything else stops the run (exit 2) with a line that names `tool`.
 */
export function pathFlag(tool, text) {
  if (text === undefined) return "bridge";
  if (paths.includes(text)) return text;
  process.stderr.write(`${tool}: --path must be ${paths.join(", ")}, got ${JSON.stringify(text)}\n`);
  process.exit(2);
}

/** Imports a built module of the checkout at `root` (its dist/), so two builds are measured by the same script. */
export const loaderOf = (root) => Object.assign((path) => import(pathToFileURL(join(root, path)).href), { root });

/** The embedded bridge of `parley` on a free loopback port, as `npm start` runs it. */
export async function startEmbeddedBridge(load, parley, grpcAddress) {
  const { createBridge, createBridgeLogger } = await load("apps/bridge/dist/index.js");
  const bridge = await createBridge({
    upstream: parley.inProcessTransport(),
    cards: parley,
    host: "127.0.0.1",
    port: 0,
    grpcAddress,
    logger: createBridgeLogger("warn"),
  });
  // Valgrind's pauses (switching instrumentation on) must not look like an idle keep-alive connection.
  bridge.server.keepAliveTimeout = 600_000;
  return { bridge, port: bridge.server.address().port };
}

/** POSTs one JSON-RPC request and resolves with the response text; an HTTP or JSON-RPC error rejects. */
export function postJsonRpc(agent, port, method, params) {
  return new Promise((done, fail) => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path: "/",
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          "a2a-version": "1.0",
          "content-length": Buffer.byteLength(body),
        },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode !== 200 || text.includes('"error"'))
            fail(new Error(`${res.statusCode} ${text.slice(0, 300)}`));
          else done(text);
        });
      },
    );
    req.on("error", fail);
    req.end(body);
  });
}

/**
 * A Parley listening on loopback (gRPC on a free port) with a temp data dir (its LevelDB, unless `env` names a
 * PARLEY_STORE_URL), the echo agent on text input and no rate limit; `env` sets the rest (PARLEY_ECHO_REPLY, ...).
 * `close` stops it and removes the data dir.
 */
export async function startBenchParley(load, env) {
  const { createParley, loadConfig } = await load("packages/server/dist/index.js");
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-"));
  const config = loadConfig({
    argv: ["--port", "0", "--data-dir", dataDir, "--log-level", "warn"],
    env: { PARLEY_RATE_LIMIT: "0", PARLEY_ECHO_INPUT: "text", ...env },
  });
  const parley = await createParley(config);
  const { address } = await parley.listen();
  const close = async () => {
    await parley.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  return { parley, address, close };
}

/**
 * A Parley on a temp data dir with the echo agent (`reply`: PARLEY_ECHO_REPLY, text input, `chunks`:
 * PARLEY_ECHO_CHUNKS; `env` adds or overrides settings, PARLEY_STORE_URL among them) and a `send` that makes one
 * turn: a JSON-RPC POST to the embedded bridge over loopback (path "bridge", on up to `sockets` keep-alive
 * connections), a call through the in-process transport ("inproc"), or a call from connect-node's gRPC or Connect
 * client over one HTTP/2 connection to Parley's port ("grpc", "connect"); SendMessage, or SendStreamingMessage read to
 * its end with `streaming`; each send to a new context, or all to one with `reuse`. `close` stops it all and
 * removes the data dir.
 */
export async function startSendingParley(
  load,
  { path = "bridge", reply = "auto", streaming = false, reuse = false, chunks, env = {}, sockets = 1 },
) {
  const {
    parley,
    address,
    close: closeParley,
  } = await startBenchParley(load, {
    PARLEY_ECHO_REPLY: reply,
    ...(chunks ? { PARLEY_ECHO_CHUNKS: String(chunks) } : {}),
    ...env,
  });
  const reused = randomUUID();
  const messageOf = () => ({
    messageId: randomUUID(),
    role: "ROLE_USER",
    parts: [{ text: "x".repeat(100) }],
    ...(reuse ? { contextId: reused } : {}),
  });
  let send;
  let stopPath = async () => {};
  if (path === "bridge") {
    const { bridge, port } = await startEmbeddedBridge(load, parley, address);
    const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
    send = () => postJsonRpc(agent, port, streaming ? "SendStreamingMessage" : "SendMessage", { message: messageOf() });
    stopPath = async () => {
      agent.destroy();
      await bridge.close?.();
    };
  } else {
    // The checkout's own copies of connect and protobuf-es, as its server uses them.
    const require = createRequire(join(load.root, "package.json"));
    const { createClient } = require("@connectrpc/connect");
    const { fromJson } = require("@bufbuild/protobuf");
    const { A2AService, SendMessageRequestSchema } = await load("proto/dist/index.js");
    let transport = parley.inProcessTransport();
    if (path === "grpc" || path === "connect") {
      const node = createRequire(join(load.root, "packages/server/package.json"))("@connectrpc/connect-node");
      const options = { baseUrl: `http://${address}`, httpVersion: "2" };
      transport = path === "grpc" ? node.createGrpcTransport(options) : node.createConnectTransport(options);
    }
    const client = createClient(A2AService, transport);
    // A2A v1.0 outside JSON-RPC names its version in a header, as the bridge's POST does.
    const options = { headers: { "a2a-version": "1.0" } };
    send = async () => {
      const request = fromJson(SendMessageRequestSchema, { message: messageOf() });
      if (streaming) {
        for await (const _ of client.sendStreamingMessage(request, options));
      } else {
        await client.sendMessage(request, options);
      }
    };
  }
  const close = async () => {
    await stopPath();
    await closeParley();
  };
  return { parley, send, close };
}
