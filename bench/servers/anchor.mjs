// The anchor: @a2a-js/sdk's own server with an echo agent equivalent to
// Parley's (lib/anchor-echo.mjs; ANCHOR_REPLY picks its reply mode), over
// JSON-RPC (express) and gRPC (grpc-js), in-memory task store.
import { randomUUID } from "node:crypto";
import { AGENT_CARD_PATH, Role, TaskState } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { A2AService, UserBuilder as GrpcUserBuilder, grpcService } from "@a2a-js/sdk/server/grpc";
import * as grpc from "@grpc/grpc-js";
import express from "express";
import { createEchoExecutor, echoCard, listenJsonRpc } from "../lib/anchor-echo.mjs";
import { serveControl } from "../lib/child-ipc.mjs";

const executor = createEchoExecutor(
  { AgentEvent, Role, TaskState },
  {
    replyMode: process.env.ANCHOR_REPLY ?? "message",
    delayMs: Number(process.env.ANCHOR_DELAY_MS ?? 0),
    newId: randomUUID,
  },
);

const handler = new DefaultRequestHandler(echoCard, new InMemoryTaskStore(), executor);
const http = await listenJsonRpc({ express, AGENT_CARD_PATH, agentCardHandler, jsonRpcHandler, UserBuilder }, handler);

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
