import { toJsonString } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { ChainLedger, messageText } from "@parley/domain";
import { ErrorInfoSchema, extensionUris, Phase, Provenance, StopReason, TaskSchema, TaskState } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { createParleyClient } from "../src/index.js";
import {
  chainReport,
  client,
  closedPort,
  jsonRpc,
  names,
  parley,
  send,
  servers,
  startChainServers,
  statusText,
  storedMessages,
  thread,
  tracked,
} from "./fixtures/chain-servers.js";

// The three server processes, their config and helpers: fixtures/chain-servers.ts.
startChainServers();

describe("one chain context, enforced at every ingress (three server processes)", () => {
  it("stops the a2a ring a -> b -> c -> a with LOOP_DETECTED at its first repeated hop, one tenant throughout", async () => {
    const contextId = `ring-${crypto.randomUUID()}`;
    const task = await send("a", "ring", "go around", contextId);
    expect(task.status?.state).toBe(TaskState.FAILED);
    const text = statusText(task);
    // The refusal at a (the fourth hop) travelled back through c and b to the first caller.
    expect(text).toContain("LOOP_DETECTED");
    expect(text).toMatch(/chain chain-\S+ came back to srv-a\/ring, which it already passed at hop 1 of 3/);
    expect(text).toMatch(/srv-a\/ring → parley-\S+\/ring → parley-\S+\/ring → srv-a\/ring/);
    expect(text).not.toContain("CONTEXT_BUSY");
    expect(chainReport(task)).toMatchObject({ refused: "LOOP_DETECTED" });
    // Each server received one request of the chain and stored only that: no failure text as an agent reply.
    for (const n of names) {
      expect(await thread(n, contextId), n).toEqual([{ provenance: Provenance.USER, text: "go around" }]);
    }
  });

  it("stops the same ring when every hop authenticates as the next server's own tenant", async () => {
    const contextId = `ring-t-${crypto.randomUUID()}`;
    const task = await send("a", "ring-t", "go around again", contextId, "key-a");
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(statusText(task)).toMatch(/LOOP_DETECTED.*came back to srv-a\/ring-t/s);
    expect(chainReport(task)).toMatchObject({ refused: "LOOP_DETECTED" });
    expect(await thread("a", contextId, "key-a")).toHaveLength(1);
    expect(await thread("b", contextId, "key-b")).toHaveLength(1);
    expect(await thread("c", contextId, "key-c")).toHaveLength(1);
    // The second arrival at a, as tenant alice again, stored nothing.
    expect(await thread("a", contextId, "key-s")).toEqual([]);
  });

  it("refuses the repeated hop itself with a typed error: gRPC FAILED_PRECONDITION, JSON-RPC -32055", async () => {
    const first = await send("b", "ring", "start at b", `direct-${crypto.randomUUID()}`);
    const trace = statusText(first);
    expect(trace).toMatch(/came back to parley-\S+\/ring/);
    // A caller that sends a chain already holding a's hop gets the refusal itself, before anything is stored.
    const chain = {
      id: "chain-by-hand",
      hops: [{ server: "srv-a", agent: "quiet" }],
      hopCount: 1,
      maxHops: 8,
      stepsLeft: 5,
      deadline: new Date(Date.now() + 60_000).toISOString(),
    };
    const contextId = `by-hand-${crypto.randomUUID()}`;
    const message = {
      messageId: crypto.randomUUID(),
      contextId,
      role: "ROLE_USER",
      parts: [{ text: "again" }],
      metadata: { [extensionUris.chain]: chain },
    };
    const response = await fetch(jsonRpc("a", "quiet"), {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0", authorization: "Bearer key-s" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message } }),
    });
    const body = (await response.json()) as { error: { code: number; message: string; data: { reason: string }[] } };
    expect(body.error.code).toBe(-32055);
    expect(body.error.message).toContain("chain chain-by-hand came back to srv-a/quiet");
    expect(body.error.data[0]!.reason).toBe("LOOP_DETECTED");
    const over = await tracked(client("a", "key-s", "quiet"))
      .a2a.sendMessage({
        message: {
          messageId: crypto.randomUUID(),
          contextId,
          role: 1,
          parts: [{ content: { case: "text", value: "again" } }],
          metadata: { [extensionUris.chain]: { ...chain, hops: [], hopCount: 0, stepsLeft: 0 } },
        },
      })
      .then(
        () => undefined,
        (error: unknown) => ConnectError.from(error),
      );
    expect(over?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("BUDGET_EXHAUSTED");
    expect(await thread("a", contextId)).toEqual([]);
  });

  it("keeps the chain context through a JSON-RPC 0.3 hop, a gRPC hop and an HTTP+JSON hop, and the refusal back", async () => {
    const contextId = `mix-${crypto.randomUUID()}`;
    const task = await send("a", "mix", "mixed bindings", contextId);
    expect(task.status?.state).toBe(TaskState.FAILED);
    // Only a context that survived a -> b (0.3), b -> c (gRPC) and c -> a (HTTP+JSON) lets a recognise itself; a's
    // refusal came back to c as a google.rpc.Status with the LOOP_DETECTED ErrorInfo.
    expect(statusText(task)).toMatch(/LOOP_DETECTED.*srv-a\/mix → parley-\S+\/mix → parley-\S+\/mix → srv-a\/mix/s);
    for (const n of names) expect(await thread(n, contextId), n).toHaveLength(1);
  });

  it("stops a longer acyclic chain with HOP_LIMIT at its ninth hop", async () => {
    const contextId = `hops-${crypto.randomUUID()}`;
    const task = await send("a", "h1", "pass it down", contextId);
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(statusText(task)).toMatch(/HOP_LIMIT.*would take hop 9 at parley-\S+\/h9, above its limit of 8 hops/s);
    expect(chainReport(task)).toMatchObject({ refused: "HOP_LIMIT" });
    // h9 never ran.
    expect((await thread("c", contextId)).filter((m) => m.text === "end of the line")).toEqual([]);
  });

  it("bounds nested conversations fanning out over three servers by the chain's budget", async () => {
    const before = await Promise.all(names.map((n) => storedMessages(n)));
    const events = [];
    const started = Date.now();
    for await (const { event } of tracked(client("a", "key-s")).sessions.converse({
      requester: { endpoint: { case: "agent", value: "req" }, contextId: `fan-r-${crypto.randomUUID()}` },
      target: { endpoint: { case: "agent", value: "tgt" }, contextId: `fan-t-${crypto.randomUUID()}` },
      text: "start the fan-out",
      maxTurns: 5,
    })) {
      if (event) events.push(event);
    }
    const elapsed = Date.now() - started;
    const done = events[events.length - 1]!;
    expect(done.phase).toBe(Phase.DONE);
    expect(done.stopReason).toBe(StopReason.STEP_BUDGET);
    expect(done.detail).toMatch(/chain chain-\S+ has no agent steps left/);
    const after = await Promise.all(names.map((n) => storedMessages(n)));
    const added = after.reduce((sum, s, i) => sum + s.messages - before[i]!.messages, 0);
    const threads = after.reduce((sum, s, i) => sum + s.threads - before[i]!.threads, 0);
    // 64 agent steps for the whole chain (the default): each stores at most its message and its reply, and
    // each conversation adds its request and outcome to the requester's thread. Without the chain budget
    // this fan-out is cut only by loop detection, after well over a hundred steps.
    expect(added).toBeGreaterThan(20);
    expect(added).toBeLessThanOrEqual(64 * 4);
    console.log(`fan-out: ${added} messages in ${threads} threads on 3 servers, ${elapsed} ms`);
  }, 90_000);
});

describe("silence on plain sends", () => {
  it("never stores or returns a silent reply over gRPC, and says the agent stayed silent", async () => {
    const contextId = `quiet-${crypto.randomUUID()}`;
    const task = await send("a", "quiet", "hello", contextId);
    expect(task.status?.state).toBe(TaskState.COMPLETED);
    expect(task.artifacts).toEqual([]);
    expect(task.metadata?.parley).toEqual({ silent: true });
    expect(toJsonString(TaskSchema, task)).not.toContain("NO_REPLY");
    expect(await thread("a", contextId)).toEqual([{ provenance: Provenance.USER, text: "hello" }]);
    // A plain send's trailing token line is dropped and the rest stands: what streamed is never taken back.
    const musingContext = `musing-${crypto.randomUUID()}`;
    const musing = await send("a", "musing", "should you answer?", musingContext);
    expect(musing.artifacts.map((a) => messageText(a)).join("")).toBe("Let me think about whether to answer.\n");
    expect(musing.metadata?.parley).toBeUndefined();
    expect(toJsonString(TaskSchema, musing)).not.toContain("NO_REPLY");
    expect((await thread("a", musingContext))[1]).toEqual({
      provenance: Provenance.AGENT,
      text: "Let me think about whether to answer.\n",
    });
  });

  it("never stores or returns a silent reply over JSON-RPC", async () => {
    const contextId = `beat-${crypto.randomUUID()}`;
    const response = await fetch(jsonRpc("b", "beat"), {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0", authorization: "Bearer key-s" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: {
          message: { messageId: crypto.randomUUID(), contextId, role: "ROLE_USER", parts: [{ text: "ping" }] },
        },
      }),
    });
    const raw = await response.text();
    expect(raw).not.toContain("HEARTBEAT_OK");
    const body = JSON.parse(raw) as { result: { task: { status: { state: string }; metadata: unknown } } };
    expect(body.result.task.status.state).toBe("TASK_STATE_COMPLETED");
    expect(body.result.task.metadata).toMatchObject({ parley: { silent: true } });
    expect(await thread("b", contextId)).toEqual([{ provenance: Provenance.USER, text: "ping" }]);
  });

  it("does not deliver a request that is a silence token, and stores nothing of it", async () => {
    const contextId = `silent-request-${crypto.randomUUID()}`;
    const refused = await send("a", "req", "NO_REPLY", contextId).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    expect(refused?.rawMessage).toContain(
      'the message is the silence token "NO_REPLY": there is nothing to deliver, so it was not sent to agent req',
    );
    expect(await thread("a", contextId)).toEqual([]);
  });

  it("prints nothing of a silent reply in the CLI", async () => {
    const contextId = `cli-quiet-${crypto.randomUUID()}`;
    const result = await parley("c", ["send", "--to", "quiet", "--context", contextId, "hello there"]);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain("NO_REPLY");
    expect(result.stderr).not.toContain("NO_REPLY");
    expect(await thread("c", contextId)).toEqual([{ provenance: Provenance.USER, text: "hello there" }]);
  });
});

describe("failures are failures", () => {
  it("names the HTTP status and body of a peer that answers 404", async () => {
    const contextId = `p404-${crypto.randomUUID()}`;
    const task = await send("a", "p404", "anyone?", contextId);
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(statusText(task)).toMatch(
      /peer p404 \(http:\/\/127\.0\.0\.1:\d+\/no\/such\/path\) answered HTTP 404 Not Found/,
    );
    expect(statusText(task)).toContain("no route for /no/such/path");
    expect(statusText(task)).not.toContain("undefined");
    expect(await thread("a", contextId)).toEqual([{ provenance: Provenance.USER, text: "anyone?" }]);
  });

  it("names ECONNREFUSED host:port for a peer that is down", async () => {
    const task = await send("b", "pdown", "hello?", `pdown-${crypto.randomUUID()}`);
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(statusText(task)).toContain(`ECONNREFUSED 127.0.0.1:${closedPort}`);
  });

  it("ends a failing agent's task FAILED without storing the failure as its reply, and relays the cause", async () => {
    const contextId = `fail-${crypto.randomUUID()}`;
    const direct = await send("b", "tgtfail", "try", contextId);
    expect(direct.status?.state).toBe(TaskState.FAILED);
    expect(statusText(direct)).toBe("agent tgtfail failed: boom");
    expect(await thread("b", contextId)).toEqual([{ provenance: Provenance.USER, text: "try" }]);
    // One hop further away, the cause still reaches the caller.
    const relayed = await send("a", "relay-fail", "try through a", `relay-${crypto.randomUUID()}`);
    expect(relayed.status?.state).toBe(TaskState.FAILED);
    expect(statusText(relayed)).toMatch(
      /peer fail-next's task at http:\/\/\S+ ended FAILED: agent tgtfail failed: boom/,
    );
  });
});

describe("targets, whoever configured them", () => {
  it("lists and sends to the server's peers and to any live thread of the tenant, ctx- or not", async () => {
    const demo = await send("a", "req", "my name is Ada", "demo");
    expect(demo.status?.state).toBe(TaskState.COMPLETED);
    const listed = await parley("a", ["send", "--list"]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(
      /a2a:req-next\s+peer\s+on the server: http:\/\/127\.0\.0\.1:\d+\/agents\/req\/ the next server's req/,
    );
    expect(listed.stdout).toMatch(/thread:demo\s+thread\s+2 messages/);
    // The server forwards to its own peer, with the token only it holds.
    const viaPeer = await parley("a", ["send", "--to", "req-next", "hello over there"]);
    expect(viaPeer.code).toBe(0);
    expect(viaPeer.stdout).toContain("question 0");
    expect((await parley("a", ["send", "--to", "a2a:req-next", "and again"])).code).toBe(0);
    // The README's `demo` thread, by its bare id and as thread:demo.
    expect((await parley("a", ["send", "--to", "demo", "what is my name?"])).code).toBe(0);
    expect((await parley("a", ["send", "--to", "thread:demo", "and now?"])).code).toBe(0);
    expect((await thread("a", "demo")).map((m) => m.text)).toEqual([
      "my name is Ada",
      "question 0",
      "what is my name?",
      "question 1",
      "and now?",
      "question 2",
    ]);
  });

  it("refuses a bare name that is both a server peer and a thread, and says how to pick one", async () => {
    await send("a", "req", "a thread named like a peer", "req-next");
    const result = await parley("a", ["send", "--to", "req-next", "which one?"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('target "req-next" is ambiguous');
    expect(result.stderr).toContain("say a2a:req-next");
    expect(result.stderr).toContain("say thread:req-next");
  });
});

describe("the client library inside an agent", () => {
  it("carries the turn's chain: its loop guard on sends, its budget on sends and conversations", async () => {
    const deadline = Date.now() + 60_000;
    const inRing = new ChainLedger({
      id: "chain-lib",
      hops: [{ server: "srv-a", agent: "ring" }],
      maxHops: 8,
      stepsLeft: 10,
      deadline,
    });
    const ring = tracked(
      createParleyClient({
        baseUrl: servers.a.grpcUrl,
        protocol: "grpc",
        token: "key-s",
        agent: "ring",
        chain: inRing,
      }),
    );
    const refused = await ring.a2a
      .sendMessage({
        message: {
          messageId: crypto.randomUUID(),
          role: 1,
          parts: [{ content: { case: "text", value: "back to a" } }],
        },
      })
      .then(
        () => undefined,
        (error: unknown) => ConnectError.from(error),
      );
    expect(refused?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("LOOP_DETECTED");
    expect(refused?.rawMessage).toContain("chain chain-lib came back to srv-a/ring");

    const fresh = new ChainLedger({ id: "chain-lib-2", hops: [], maxHops: 8, stepsLeft: 40, deadline });
    const lib = tracked(
      createParleyClient({ baseUrl: servers.b.grpcUrl, protocol: "grpc", token: "key-s", agent: "req", chain: fresh }),
    );
    await lib.a2a.sendMessage({
      message: { messageId: crypto.randomUUID(), role: 1, parts: [{ content: { case: "text", value: "one step" } }] },
    });
    expect(fresh.stepsLeft).toBe(39);
    for await (const _ of lib.sessions.converse({
      requester: { endpoint: { case: "agent", value: "req" }, contextId: `lib-r-${crypto.randomUUID()}` },
      target: { endpoint: { case: "agent", value: "req" }, contextId: `lib-t-${crypto.randomUUID()}` },
      text: "a short talk",
      maxTurns: 1,
    })) {
      // Drained: the trailer with the chain's report comes at the end.
    }
    // Round one, one ping-pong turn and the announce step: three agent steps of the same chain.
    expect(fresh.stepsLeft).toBe(36);
  });
});
