// What the single-process bench scripts (turn-cost, pg-turn-cost, held-streams) share: their flags, loading another
// checkout's build (--root), an embedded bridge in front of a Parley in the same process, and one JSON-RPC POST.
import http from "node:http";
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

/** Imports a built module of the checkout at `root` (its dist/), so two builds are measured by the same script. */
export const loaderOf = (root) => (path) => import(pathToFileURL(join(root, path)).href);

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
