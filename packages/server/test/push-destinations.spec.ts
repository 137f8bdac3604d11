// Issue 20 item 5: push notifications cannot reach internal services. A real
// loopback HTTP listener stands in for an internal service; every spelling of
// a refused address is tried at the config set call and, past it (written
// straight to the store, as a config stored before the rules tightened), at
// delivery, and the listener must receive nothing.

import { lookup } from "node:dns/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { TaskPushNotificationConfigSchema } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPushAddressPolicy } from "../src/push/push-address-policy.js";
import { resolvePushDestination } from "../src/push/push-destination.js";
import { postPinned } from "../src/push/push-request.js";
import { memoryLogger } from "./fixtures/memory-logger.js";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

/** An HTTP listener on 127.0.0.1 that counts what reaches it; `answer` picks the status (and headers). */
async function listener(answer: () => [number, Record<string, string>?] = () => [204]) {
  const seen: { url: string; token: string }[] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ url: req.url ?? "", token: String(req.headers["x-a2a-notification-token"] ?? "") });
    req.resume();
    req.on("end", () => {
      const [status, headers] = answer();
      res.writeHead(status, headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { port, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

type Listener = Awaited<ReturnType<typeof listener>>;

/** Every spelling of a refused destination the audit tried, pointed at `port`. */
function refusedUrls(port: number): Record<string, string> {
  return {
    loopback: `http://127.0.0.1:${port}/hook`,
    localhost: `http://localhost:${port}/hook`,
    "IPv6 loopback": `http://[::1]:${port}/hook`,
    "short form": `http://127.1:${port}/hook`,
    hex: `http://0x7f000001:${port}/hook`,
    "dotted hex": `http://0x7f.1:${port}/hook`,
    decimal: `http://2130706433:${port}/hook`,
    octal: `http://0177.0.0.1:${port}/hook`,
    "IPv4-mapped": `http://[::ffff:127.0.0.1]:${port}/hook`,
    unspecified: `http://0.0.0.0:${port}/hook`,
    metadata: `http://169.254.169.254:${port}/latest/meta-data/`,
    "metadata over IPv6": `http://[fd00:ec2::254]:${port}/`,
    "RFC 1918 10/8": `http://10.0.0.1:${port}/hook`,
    "RFC 1918 192.168/16": `http://192.168.1.1:${port}/hook`,
    "RFC 1918 172.16/12": `http://172.16.0.1:${port}/hook`,
    CGNAT: `http://100.64.0.1:${port}/hook`,
    ULA: `http://[fd12::1]:${port}/hook`,
    "link-local": `http://169.254.1.1:${port}/hook`,
    multicast: `http://224.0.0.1:${port}/hook`,
  };
}

async function refusedCount(server: TestServer): Promise<number> {
  const text = (await server.parley.observability.metrics?.render()) ?? "";
  const match = /parley_push_deliveries_total\{outcome="refused"\} (\d+)/.exec(text);
  return match ? Number(match[1]) : 0;
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("push destinations are checked against the address they reach", () => {
  let internal: Listener;
  let server: TestServer;
  const log = memoryLogger();

  beforeAll(async () => {
    internal = await listener();
    // Default push settings: no allowed hosts, no allowed addresses.
    server = await startTestServer(
      {
        agents: [{ name: "conformance", type: "conformance" }],
        capabilities: { pushNotifications: true },
        // One task carries a config per refused form of address below, more than the default cap.
        push: { retryBaseMs: 10, maxAttempts: 3, timeoutMs: 5_000, maxConfigsPerTask: 100 },
      },
      { logger: log.logger },
    );
  });
  afterAll(async () => {
    await server.close();
    await internal.close();
  });

  it("the defaults allow no host list and no address exemption", () => {
    expect(server.parley.config.push.allowedHosts).toEqual([]);
    expect(server.parley.config.push.allowedAddresses).toEqual([]);
  });

  it("refuses every spelling of an internal address at the config set call, naming the address", async () => {
    const a2a = server.a2a("connect");
    const waiting = await a2a.sendMessage({
      message: userMessage("wait", { messageId: `tck-input-required-${crypto.randomUUID()}` }),
    });
    const taskId = waiting.payload.case === "task" ? waiting.payload.value.id : "";
    expect(taskId).not.toBe("");
    for (const [form, url] of Object.entries(refusedUrls(internal.port))) {
      const error = await a2a.createTaskPushNotificationConfig({ taskId, url }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(error?.code, form).toBe(Code.InvalidArgument);
      expect(error?.rawMessage, form).toMatch(/push notifications go there only if push\.allowedAddresses/);
    }
    const onSend = await a2a
      .sendMessage({
        message: userMessage("hi"),
        configuration: { taskPushNotificationConfig: { url: `http://127.1:${internal.port}/` } },
      })
      .catch((e: unknown) => ConnectError.from(e));
    expect((onSend as ConnectError).rawMessage).toContain("127.0.0.1 is loopback (not a public address)");
    expect(internal.seen).toHaveLength(0);
  });

  it("refuses them again at delivery, names resolving to loopback included; the listener receives nothing", async () => {
    const a2a = server.a2a("connect");
    const waiting = await a2a.sendMessage({
      message: userMessage("wait", { messageId: `tck-input-required-${crypto.randomUUID()}` }),
    });
    const taskId = waiting.payload.case === "task" ? waiting.payload.value.id : "";
    const urls = refusedUrls(internal.port);
    // Stored past the set call's check, as configs stored before an operator narrowed the rules.
    for (const [form, url] of Object.entries(urls)) {
      const configId = form.replace(/\W+/g, "-");
      await server.parley.store.putPushConfig({
        tenant: "default",
        taskId,
        configId,
        payload: toBinary(
          TaskPushNotificationConfigSchema,
          create(TaskPushNotificationConfigSchema, { id: configId, taskId, url, token: configId }),
        ),
      });
    }
    // The audit's "vm": this machine's own name, which resolves to loopback. A name passes the set call
    // (it is not resolved there) and is refused at delivery against what it resolves to.
    const self = hostname();
    const selfAddresses = await lookup(self, { all: true });
    expect(
      selfAddresses.every((a) => /^(127\.|::1$)/.test(a.address)),
      `${self} resolves to loopback here`,
    ).toBe(true);
    await a2a.createTaskPushNotificationConfig({
      taskId,
      id: "own-name",
      url: `http://${self}:${internal.port}/hook`,
      token: "own-name",
    });
    const before = await refusedCount(server);
    await a2a.sendMessage({
      message: userMessage("done", { taskId, messageId: `tck-complete-task-${crypto.randomUUID()}` }),
    });
    // Two events (the follow-up's task and its completion) per config, each refused without a retry.
    const expected = 2 * (Object.keys(urls).length + 1);
    await until(async () => (await refusedCount(server)) - before >= expected, "the refusals");
    expect((await refusedCount(server)) - before).toBe(expected);
    expect(internal.seen).toHaveLength(0);
    const refusals = log.lines.filter((l) => l.msg === "push notification refused: its destination is not allowed");
    expect(refusals.length).toBeGreaterThanOrEqual(expected);
    expect(refusals.map((l) => String(l.err))).toContainEqual(
      expect.stringContaining(`host ${JSON.stringify(self)} resolves to ${selfAddresses[0]!.address}: `),
    );
  });

  it("a name on push.allowedHosts is still checked against what it resolves to", async () => {
    const rules = { allowedHosts: ["vm"], addresses: createPushAddressPolicy([]) };
    const loopback = await resolvePushDestination("http://vm:8080/hook", rules, async () => [
      { address: "127.0.0.1", family: 4 },
    ]);
    expect(loopback).toEqual({ ok: false, reason: expect.stringContaining('"vm" resolves to 127.0.0.1') });
    // One refused address among good ones refuses the name.
    const mixed = await resolvePushDestination("http://vm/", rules, async () => [
      { address: "93.184.215.14", family: 4 },
      { address: "::ffff:10.0.0.1", family: 6 },
    ]);
    expect(mixed.ok).toBe(false);
    const publicName = await resolvePushDestination("http://vm/", rules, async () => [
      { address: "93.184.215.14", family: 4 },
    ]);
    expect(publicName).toMatchObject({ ok: true, value: { address: "93.184.215.14", family: 4 } });
  });

  it("a wide CIDR does not unlock the metadata endpoint; only its exact address does", () => {
    const wide = createPushAddressPolicy(["169.254.0.0/16", "fd00::/8"]);
    expect(wide.refusal("169.254.1.1")).toBeUndefined();
    expect(wide.refusal("169.254.169.254")).toContain("cloud metadata endpoint");
    expect(wide.refusal("fd00:ec2::254")).toContain("cloud metadata endpoint");
    expect(createPushAddressPolicy(["169.254.169.254"]).refusal("169.254.169.254")).toBeUndefined();
    expect(createPushAddressPolicy(["::ffff:10.0.0.0/104"]).refusal("10.9.9.9")).toBeUndefined();
  });
});

describe("explicitly allowed addresses, redirects and pinning", () => {
  let receiver: Listener;
  let target: Listener;
  let redirecting: Listener;
  let server: TestServer;

  beforeAll(async () => {
    receiver = await listener();
    target = await listener();
    redirecting = await listener(() => [307, { location: `http://127.0.0.1:${target.port}/elsewhere` }]);
    server = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { pushNotifications: true },
      push: { allowedAddresses: ["127.0.0.0/8"], retryBaseMs: 10, maxAttempts: 3, timeoutMs: 5_000 },
    });
  });
  afterAll(async () => {
    await server.close();
    for (const l of [receiver, target, redirecting]) await l.close();
  });

  it("delivers to an address inside an allowed CIDR, in every spelling, and never follows a redirect", async () => {
    const a2a = server.a2a("connect");
    const send = (token: string, url: string) =>
      a2a.sendMessage({
        message: userMessage("go", { messageId: `tck-complete-task-${crypto.randomUUID()}` }),
        configuration: { taskPushNotificationConfig: { url, token } },
      });
    await send("cidr", `http://127.0.0.1:${receiver.port}/hook`);
    await send("short", `http://127.1:${receiver.port}/hook`);
    await send("redirect", `http://127.0.0.1:${redirecting.port}/hook`);
    await until(
      async () => ["cidr", "short"].every((t) => receiver.seen.filter((s) => s.token === t).length >= 2),
      "the deliveries",
    );
    expect(receiver.seen.filter((s) => s.token === "cidr")).toHaveLength(2);
    await until(async () => redirecting.seen.length >= 2, "the redirecting receiver");
    // A 3xx is a refusal by the receiver: no retry, and its Location is never visited.
    expect(redirecting.seen).toHaveLength(2);
    expect(target.seen).toHaveLength(0);
    // ::1 is outside 127.0.0.0/8: still refused.
    const v6 = await a2a
      .createTaskPushNotificationConfig({ taskId: "any", url: `http://[::1]:${receiver.port}/` })
      .catch((e: unknown) => ConnectError.from(e));
    expect((v6 as ConnectError).rawMessage).toContain("::1 is loopback");
  });

  it("connects to the checked address, never to what the name resolves to later", async () => {
    // A name no resolver knows: the POST still lands, because it is pinned to the address checked before.
    const status = await postPinned(
      {
        url: new URL(`http://rebinding.invalid:${receiver.port}/pinned`),
        address: "127.0.0.1",
        family: 4,
      },
      { "Content-Type": "application/a2a+json" },
      "{}",
      AbortSignal.timeout(5_000),
    );
    expect(status).toBe(204);
    expect(receiver.seen.some((s) => s.url === "/pinned")).toBe(true);
  });
});
