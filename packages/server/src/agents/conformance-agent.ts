import { fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Agent, type AgentEvent, type AgentTurn, sleep } from "@parley/domain";
import { type PartSchema, TaskState } from "@parley/proto";
import type { ConformanceOptions } from "./conformance-options.js";

/** The options of a configured conformance agent (see conformance-options.ts), and its name. */
export type ConformanceAgentOptions = Readonly<ConformanceOptions> & { readonly name?: string };

type Part = MessageInitShape<typeof PartSchema>;
type Script = (turn: AgentTurn, options: Required<ConformanceAgentOptions>) => AsyncIterable<AgentEvent>;

const text = (value: string): Part => ({ content: { case: "text", value } });
const fileBytes = (): Part => ({
  content: { case: "raw", value: new TextEncoder().encode("Generated file content") },
  filename: "output.txt",
  mediaType: "text/plain",
});
const fileUrl = (): Part => ({
  content: { case: "url", value: "https://example.com/output.txt" },
  filename: "output.txt",
  mediaType: "text/plain",
});
const data = (): Part => ({ content: { case: "data", value: fromJson(ValueSchema, { key: "value", count: 42 }) } });

function artifact(artifactId: string, parts: Part[]): AgentEvent {
  return { type: "artifact", artifact: { artifactId, name: artifactId, parts } };
}

const completed = (statusText?: string): AgentEvent => ({
  type: "state",
  state: TaskState.COMPLETED,
  ...(statusText !== undefined ? { text: statusText } : {}),
});
const working: AgentEvent = { type: "state", state: TaskState.WORKING };

async function* of(...events: AgentEvent[]): AsyncIterable<AgentEvent> {
  yield* events;
}

/** What each messageId prefix of the kit's scenarios asks the agent under test to do. */
const scripts: Readonly<Record<string, Script>> = {
  "tck-complete-task": () => of(completed("Hello from TCK")),
  "tck-input-required": () =>
    of({ type: "state", state: TaskState.INPUT_REQUIRED, text: "Input required: send a follow-up message" }),
  "tck-message-response": () => of({ type: "message", parts: [text("Direct message response")] }),
  "tck-artifact-text": () => of(artifact("text-artifact", [text("Generated text content")]), completed()),
  "tck-artifact-file-url": () => of(artifact("file-url-artifact", [fileUrl()]), completed()),
  "tck-artifact-file": () => of(artifact("file-artifact", [fileBytes()]), completed()),
  "tck-artifact-data": () => of(artifact("data-artifact", [data()]), completed()),
  "tck-stream-001": () => of(working, artifact("stream-artifact", [text("Stream hello from TCK")]), completed()),
  "tck-stream-002": () => of(completed()),
  "tck-stream-003": () => of(working, artifact("stream-artifact", [text("Stream task lifecycle")]), completed()),
  "tck-stream-ordering-001": () => of(working, artifact("ordered-artifact", [text("Ordered output")]), completed()),
  "tck-stream-artifact-text": () =>
    of(working, artifact("stream-text-artifact", [text("Streamed text content")]), completed()),
  "tck-stream-artifact-file": () => of(working, artifact("stream-file-artifact", [fileBytes()]), completed()),
  "tck-stream-artifact-chunked": () =>
    of(
      working,
      { type: "artifact", artifact: { artifactId: "chunked-artifact", parts: [text("chunk-1 ")] } },
      {
        type: "artifact",
        artifact: { artifactId: "chunked-artifact", parts: [text("chunk-2")] },
        append: true,
        lastChunk: true,
      },
      completed(),
    ),
  "tck-reject-task": () => of({ type: "state", state: TaskState.REJECTED, text: "rejected" }),
  "test-resubscribe-message-id": async function* (turn, options) {
    yield working;
    await sleep(options.resubscribeWorkMs, turn.signal);
    yield completed("Resubscribe task done");
  },
};

// Longest first, so `tck-artifact-file-url` is not taken for `tck-artifact-file`.
const prefixes = Object.keys(scripts).sort((a, b) => b.length - a.length);

/** The scenario prefix a messageId starts with, if any. */
export function conformancePrefixOf(messageId: string): string | undefined {
  return prefixes.find((prefix) => messageId.startsWith(prefix));
}

/**
 * The agent under test for A2A conformance kits: its behaviour is chosen by
 * the prefix of the user message's messageId (the kit appends `-<hex>` and
 * sometimes a transport suffix). Any other message gets a completed task.
 */
export function createConformanceAgent(options: ConformanceAgentOptions = {}): Agent {
  const resolved: Required<ConformanceAgentOptions> = {
    name: options.name ?? "conformance",
    resubscribeWorkMs: options.resubscribeWorkMs ?? 4_000,
  };
  return {
    name: resolved.name,
    description: "Acts on the messageId prefixes of the A2A conformance kit (TCK)",
    run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const prefix = conformancePrefixOf(turn.message.messageId);
      if (prefix === undefined) return of(completed(`Processed: ${turn.text}`));
      return scripts[prefix]!(turn, resolved);
    },
  };
}
