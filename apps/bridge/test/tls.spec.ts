// Native TLS on both ports, with certificates made by openssl at test time: the official @a2a-js/sdk JSON-RPC
// client (in a child process that trusts the test CA) and `buf curl --cacert` against the bridge's HTTPS port
// and the server's h2 port; reload on file change and on SIGHUP; mutual TLS refuses a client without a certificate.

import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connect } from "node:tls";
import { promisify } from "node:util";
import type { Transport } from "@connectrpc/connect";
import { defaultConfig, loadConfig } from "@parley/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConnectRoutes } from "../src/connect-routes.js";
import { startStack, type TestStack } from "./harness.js";

const execFileAsync = promisify(execFile);
/** Runs a program; a failure's error carries what it wrote to stderr. */
async function run(file: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  try {
    return await execFileAsync(file, args, options);
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? "";
    throw new Error(`${(error as Error).message}\n${stderr}`);
  }
}
const repo = resolve(import.meta.dirname, "../../..");
const buf = join(repo, "node_modules/.bin/buf");

/** A CA, and certificates it signs for 127.0.0.1 (server) or a client, all made with openssl in `dir`. */
function makePki(dir: string) {
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=Parley Test CA");
  const issue = (name: string, cn: string, ext: string) => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`);
    openssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    );
    return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
  };
  return {
    ca: join(dir, "ca.pem"),
    server: (name: string) => issue(name, "127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
    client: (name: string) => issue(name, "parley-test-client", "extendedKeyUsage=clientAuth\n"),
  };
}

/** The serial number of the certificate a new TLS connection to `port` is shown. */
function servedSerial(port: number, ca: string, alpn: string[]): Promise<string> {
  return new Promise((resolveSerial, reject) => {
    const socket = connect({ host: "127.0.0.1", port, ca: readFileSync(ca), ALPNProtocols: alpn }, () => {
      resolveSerial(socket.getPeerCertificate().serialNumber);
      socket.end();
    });
    socket.on("error", reject);
  });
}

function serialOf(certFile: string): string {
  const out = execFileSync("openssl", ["x509", "-in", certFile, "-noout", "-serial"]).toString();
  return out.trim().replace(/^serial=/, "");
}

/** Waits until new connections to `port` are shown the certificate with `serial` (a reload is asynchronous). */
async function servedAfterReload(port: number, ca: string, serial: string, alpn: string[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if ((await servedSerial(port, ca, alpn)) === serial) return;
    if (Date.now() > deadline) throw new Error(`port ${port} never served certificate ${serial}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("native TLS on both ports", () => {
  let dir: string;
  let pki: ReturnType<typeof makePki>;
  let stack: TestStack;
  let files: { certFile: string; keyFile: string };
  const reloads: Array<{ why: string }> = [];
  let grpcPort: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "parley-tls-"));
    pki = makePki(dir);
    const first = pki.server("server");
    files = { certFile: first.cert, keyFile: first.key };
    // The Connect routes as parley-bridge serves them, for buf curl on the bridge's port.
    let upstream: Transport | undefined;
    const forward: Transport = {
      unary: (...args) => upstream!.unary(...args),
      stream: (...args) => upstream!.stream(...args),
    };
    stack = await startStack(
      { tls: files },
      {
        tls: {
          files,
          log: { info: (fields) => reloads.push(fields as { why: string }), error: () => {} },
        },
        routes: [createConnectRoutes({ upstream: forward, maxBodyBytes: 1024 * 1024 })],
      },
    );
    upstream = stack.parley.inProcessTransport();
    grpcPort = Number(stack.grpcAddress.split(":").at(-1));
  });
  afterAll(async () => {
    await stack?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves the official SDK's JSON-RPC client over HTTPS, and the card advertises https", async () => {
    expect(stack.bridge.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/$/);
    const script = `
      import { ClientFactory } from "@a2a-js/sdk/client";
      const client = await new ClientFactory().createFromUrl(process.argv[1]);
      const card = await client.getAgentCard();
      const reply = await client.sendMessage({
        message: { messageId: crypto.randomUUID(), role: 1, parts: [{ content: { $case: "text", value: "over TLS" } }] },
      });
      console.log(JSON.stringify({ urls: card.supportedInterfaces.map((i) => i.url), state: reply.status?.state }));
    `;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script, stack.bridge.url], {
      cwd: resolve(import.meta.dirname, ".."),
      env: { ...process.env, NODE_EXTRA_CA_CERTS: pki.ca },
    });
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as { urls: string[]; state: number };
    // JSON-RPC 1.0 and 0.3 at the bridge's URL, HTTP+JSON at the same URL without its final slash: all https.
    expect(result.urls.filter((u) => u.startsWith("http"))).toEqual([
      stack.bridge.url,
      stack.bridge.url,
      stack.bridge.url.replace(/\/$/, ""),
    ]);
    expect(result.state).toBe(3); // TASK_STATE_COMPLETED
  });

  it("serves buf curl with --cacert on the h2 port (gRPC, by reflection) and on the bridge's port (Connect)", async () => {
    const body = JSON.stringify({ message: { messageId: "tls-buf-1", role: "ROLE_USER", parts: [{ text: "hi" }] } });
    const grpc = await run(buf, [
      "curl",
      "--cacert",
      pki.ca,
      "--protocol",
      "grpc",
      "-H",
      "a2a-version: 1.0",
      "-d",
      body,
      `https://127.0.0.1:${grpcPort}/lf.a2a.v1.A2AService/SendMessage`,
    ]);
    expect(JSON.parse(grpc.stdout).task.status.state).toBe("TASK_STATE_COMPLETED");
    const connectRpc = await run(buf, [
      "curl",
      "--cacert",
      pki.ca,
      "--schema",
      join(repo, "proto"),
      "--protocol",
      "connect",
      "-H",
      "a2a-version: 1.0",
      "-d",
      body.replace("tls-buf-1", "tls-buf-2"),
      `${stack.bridge.url}lf.a2a.v1.A2AService/SendMessage`,
    ]);
    expect(JSON.parse(connectRpc.stdout).task.status.state).toBe("TASK_STATE_COMPLETED");
  }, 60_000);

  it("offers h2 and http/1.1 by ALPN on the server's port, http/1.1 on the bridge's", async () => {
    const alpnOf = (port: number, offered: string[]) =>
      new Promise<string | false>((done, reject) => {
        const socket = connect({ host: "127.0.0.1", port, ca: readFileSync(pki.ca), ALPNProtocols: offered }, () => {
          done(socket.alpnProtocol ?? false);
          socket.end();
        });
        socket.on("error", reject);
      });
    const bridgePort = stack.bridge.port;
    expect(await alpnOf(grpcPort, ["h2", "http/1.1"])).toBe("h2");
    expect(await alpnOf(grpcPort, ["http/1.1"])).toBe("http/1.1");
    expect(await alpnOf(bridgePort, ["h2", "http/1.1"])).toBe("http/1.1");
  });

  it("reloads the certificate when its files change and on SIGHUP; new connections get the new one", async () => {
    const bridgePort = stack.bridge.port;
    expect(await servedSerial(grpcPort, pki.ca, ["h2"])).toBe(serialOf(files.certFile));
    // Rotated as deployments do: the new files renamed over the old ones.
    const next = pki.server("next");
    renameSync(next.key, files.keyFile);
    renameSync(next.cert, files.certFile);
    const serial = serialOf(files.certFile);
    await servedAfterReload(grpcPort, pki.ca, serial, ["h2"]);
    await servedAfterReload(bridgePort, pki.ca, serial, ["http/1.1"]);
    expect(reloads.some((r) => /changed/.test(r.why))).toBe(true);
    process.emit("SIGHUP", "SIGHUP");
    expect(reloads.some((r) => r.why === "SIGHUP")).toBe(true);
    expect(await servedSerial(bridgePort, pki.ca, ["http/1.1"])).toBe(serial);
  });
});

describe("the tls settings", () => {
  it("take both files or neither, and a client CA only with them", () => {
    const env = { PARLEY_DATA_DIR: "/tmp/unused" };
    expect(() => loadConfig({ argv: [], env: { ...env, PARLEY_TLS_CERT: "/c.pem" } })).toThrow(
      /tls\.certFile and tls\.keyFile go together/,
    );
    expect(() => loadConfig({ argv: [], env: { ...env, PARLEY_TLS_CLIENT_CA: "/ca.pem" } })).toThrow(
      /a client CA \(mutual TLS\) needs TLS itself/,
    );
    const config = loadConfig({ argv: ["--tls-cert", "/c.pem", "--tls-key", "/k.pem"], env });
    expect(config.tls).toEqual({ certFile: "/c.pem", keyFile: "/k.pem" });
  });
});

describe("mutual TLS", () => {
  let dir: string;
  let pki: ReturnType<typeof makePki>;
  let stack: TestStack;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "parley-mtls-"));
    pki = makePki(dir);
    const server = pki.server("server");
    const tls = { certFile: server.cert, keyFile: server.key, clientCaFile: pki.ca };
    stack = await startStack(
      { tls: { ...defaultConfig.tls, ...tls } },
      { tls: { files: tls, log: { info: () => {}, error: () => {} } } },
    );
  });
  afterAll(async () => {
    await stack?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const cardStatus = (port: number, client?: { cert: string; key: string }) =>
    new Promise<number>((done, reject) => {
      const req = httpsRequest(
        {
          host: "127.0.0.1",
          port,
          path: "/.well-known/agent-card.json",
          ca: readFileSync(pki.ca),
          ...(client ? { cert: readFileSync(client.cert), key: readFileSync(client.key) } : {}),
        },
        (res) => {
          res.resume();
          done(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end();
    });

  it("refuses a client without a certificate on both ports and serves one the CA signed", async () => {
    const client = pki.client("client");
    const grpcPort = Number(stack.grpcAddress.split(":").at(-1));
    for (const port of [stack.bridge.port, grpcPort]) {
      await expect(cardStatus(port)).rejects.toThrow(/certificate|socket hang up|ECONNRESET/i);
    }
    expect(await cardStatus(stack.bridge.port, client)).toBe(200);
    // The h2 port serves no card: any HTTP answer shows the handshake passed.
    expect(await cardStatus(grpcPort, client)).toBeGreaterThan(0);
  });
});
