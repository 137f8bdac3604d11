// The anchor's echo agent, shared by the in-memory anchor (servers/anchor.mjs) and the
// durable anchors (anchors/anchor-db.mjs). The SDK is passed in rather than imported:
// the durable anchors run against their own copy of @a2a-js/sdk (anchors/package.json),
// because its database store resolves kysely and the drivers from where the SDK lives.
//
// Reply modes:
// - "message": one Message (the SDK's cheapest path);
// - "stream": a Task, 8 appended artifact chunks, then COMPLETED (Parley's echo for a stream);
// - "task": a Task, one artifact with the whole text, then COMPLETED (a durable task reply).
const CHUNKS = 8;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const textPart = (value) => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

export function createEchoExecutor({ AgentEvent, Role, TaskState }, { replyMode, delayMs = 0, newId }) {
  return {
    async cancelTask() {},
    async execute(ctx, bus) {
      const text = ctx.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n");
      if (replyMode === "message") {
        bus.publish(
          AgentEvent.message({
            messageId: newId(),
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
      const size = replyMode === "task" ? Math.max(1, text.length) : Math.max(1, Math.ceil(text.length / CHUNKS));
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
}

/** The anchor's agent card; the SDK's gRPC service accepts only the versions the card declares for GRPC. */
export const echoCard = {
  name: "Echo",
  description: "echo anchor",
  version: "1.0.0",
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

/** Serves an SDK request handler's JSON-RPC and agent card on a loopback port (express and the SDK passed in). */
export async function listenJsonRpc(
  { express, AGENT_CARD_PATH, agentCardHandler, jsonRpcHandler, UserBuilder },
  handler,
) {
  const app = express();
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  const http = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  http.keepAliveTimeout = 60_000;
  return http;
}
