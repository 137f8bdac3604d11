// The anchor: @a2a-js/sdk's own server with an echo agent equivalent to
// Parley's, over JSON-RPC (express) and gRPC (grpc-js), in-memory task store.
// ANCHOR_REPLY=message answers a send with one Message (the SDK's cheapest
// path); ANCHOR_REPLY=stream publishes a Task, 8 appended artifact chunks and
// COMPLETED, which is what Parley's echo agent does for every send.
import { randomUUID } from "node:crypto";
import { AGENT_CARD_PATH, Role, TaskState } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { A2AService, UserBuilder as GrpcUserBuilder, grpcService } from "@a2a-js/sdk/server/grpc";
import * as grpc from "@grpc/grpc-js";
import express from "express";
import { serveControl } from "../lib/child-ipc.mjs";

const replyMode = process.env.ANCHOR_REPLY ?? "message";
const delayMs = Number(process.env.ANCHOR_DELAY_MS ?? 0);
const CHUNKS = 8;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const textPart = (value) => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

const executor = {
  async cancelTask() {},
  async execute(ctx, bus) {
    const text = ctx.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n");
    if (replyMode === "message") {
      bus.publish(
        AgentEvent.message({
          messageId: randomUUID(),
          contextId: ctx.contextId,
          taskId: "",
          role: Role.ROLE_AGENT,
          parts: [textPart(text)],
          metadata: {},
          extensions: [],
          referenceTaskIds: [],
        }),
      );
      bus.finished();
      return;
    }
    const { taskId, contextId } = ctx;
    bus.publish(
      AgentEvent.task(
        ctx.task ?? {
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [ctx.userMessage],
          metadata: {},
        },
      ),
    );
    const size = Math.max(1, Math.ceil(text.length / CHUNKS));
    let i = 0;
    for (let at = 0; at < text.length; at += size, i++) {
      if (delayMs > 0) await sleep(delayMs);
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          append: i > 0,
          lastChunk: at + size >= text.length,
          metadata: {},
          artifact: {
            artifactId: "reply",
            name: "reply",
            description: "",
            metadata: {},
            extensions: [],
            parts: [textPart(text.slice(at, at + size))],
          },
        }),
      );
    }
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        metadata: {},
        status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: new Date().toISOString() },
      }),
    );
    bus.finished();
  },
};

const card = {
  name: "Echo",
  description: "echo anchor",
  version: "1.0.0",
  // The SDK's gRPC service accepts only the versions the card declares for the GRPC binding.
  supportedInterfaces: [
    { url: "http://127.0.0.1/", protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    { url: "127.0.0.1:0", protocolBinding: "GRPC", tenant: "", protocolVersion: "1.0" },
  ],
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: [
    {
      id: "echo",
      name: "echo",
      description: "echo",
      tags: ["echo"],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  signatures: [],
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const http = await new Promise((resolve) => {
  const s = app.listen(0, "127.0.0.1", () => resolve(s));
});
http.keepAliveTimeout = 60_000;

const grpcServer = new grpc.Server();
grpcServer.addService(
  A2AService,
  grpcService({ requestHandler: handler, userBuilder: GrpcUserBuilder.noAuthentication }),
);
const grpcPort = await new Promise((resolve, reject) =>
  grpcServer.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) =>
    err ? reject(err) : resolve(port),
  ),
);

serveControl({ stop: async () => setImmediate(() => process.exit(0)) });
process.send({
  ready: true,
  jsonRpcUrl: `http://127.0.0.1:${http.address().port}/`,
  grpcUrl: `http://127.0.0.1:${grpcPort}`,
});
