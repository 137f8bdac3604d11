import { toJson } from "@bufbuild/protobuf";
import { TaskSchema, TaskState } from "@parley/proto";
import type { Command } from "commander";
import { type ConversationBackend, createConversation, taskStateName } from "../conversation.js";
import { ExitCode, UsageError } from "../errors.js";
import { createJsonRpcA2AClient } from "../json-rpc-client.js";
import { createRestA2AClient } from "../rest-client.js";
import { formatKnownTargets, listTargets, peerPrefix, type ResolvedTarget, resolveTarget } from "../targets.js";
import { terminalId, terminalText } from "../terminal-text.js";
import type { CommandContext, RunCommand } from "./command-context.js";
import { parseContextId } from "./context-id-argument.js";
import { exitCodeHelp, jsonLine } from "./output.js";

interface SendOptions {
  to?: string;
  context?: string;
  json?: boolean;
  list?: boolean;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** A spinner on stderr until the first chunk; only for a person watching a terminal. */
function startSpinner(label: string): () => void {
  if (!process.stderr.isTTY) return () => {};
  const frames = ["|", "/", "-", "\\"];
  let i = 0;
  const shown = terminalText(label);
  const timer = setInterval(() => process.stderr.write(`\r${frames[i++ % frames.length]} ${shown}`), 100);
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    process.stderr.write("\r\x1b[K");
  };
}

/**
 * With --protocol rest, what is sent to the server goes to its bridge port's HTTP+JSON binding: the default agent
 * at the server URL, a hosted agent (a server peer's "a2a:<peer>" too) at /agents/<name> below it.
 */
function restBackendFor(context: CommandContext, target: ResolvedTarget | undefined): ConversationBackend | undefined {
  if (context.explicitProtocol !== "rest" || target?.kind === "endpoint") return undefined;
  const server = context.config.server.replace(/\/+$/, "");
  const agent =
    target?.kind === "agent"
      ? target.agent
      : target?.kind === "server-peer"
        ? `${peerPrefix}${target.peer}`
        : undefined;
  const url = agent === undefined ? server : `${server}/agents/${encodeURIComponent(agent)}`;
  return { a2a: createRestA2AClient({ url, token: context.config.token }) };
}

function backendFor(context: CommandContext, target: ResolvedTarget | undefined): ConversationBackend {
  const rest = restBackendFor(context, target);
  if (rest) return rest;
  if (!target) return context.client();
  switch (target.kind) {
    case "agent":
      return context.client({ agent: target.agent });
    case "thread":
      return context.client();
    case "server-peer":
      // The server forwards to its own peer, with the credentials only it holds.
      return context.client({ agent: `${peerPrefix}${target.peer}` });
    case "endpoint":
      if (target.protocol === "jsonrpc")
        return { a2a: createJsonRpcA2AClient({ url: target.url, token: target.token }) };
      if (target.protocol === "rest") return { a2a: createRestA2AClient({ url: target.url, token: target.token }) };
      return context.client({ baseUrl: target.url, protocol: target.protocol, token: target.token });
  }
}

async function runList(context: CommandContext, json: boolean): Promise<number> {
  const listing = await listTargets(context.config, context.client());
  if (json) for (const t of listing.targets) jsonLine(t);
  else if (listing.targets.length === 0) process.stdout.write("no targets: no peers configured and no live threads\n");
  else process.stdout.write(`${formatKnownTargets(listing.targets).join("\n")}\n`);
  if (listing.problem) {
    process.stderr.write(`parley: the server's agents and threads are missing: ${terminalText(listing.problem)}\n`);
    return ExitCode.remote;
  }
  return ExitCode.ok;
}

async function runSend(context: CommandContext, textArg: string | undefined, options: SendOptions): Promise<number> {
  const json = options.json === true;
  if (options.list) {
    if (textArg !== undefined) throw new UsageError("send --list takes no TEXT");
    return runList(context, json);
  }
  if (textArg === undefined) throw new UsageError("send needs TEXT (or - to read it from stdin), or --list");
  const text = textArg === "-" ? await readStdin() : textArg;
  if (text.trim() === "") throw new UsageError(textArg === "-" ? "stdin held no text to send" : "TEXT is empty");

  const target = options.to
    ? await resolveTarget(options.to, {
        config: context.config,
        server: context.client(),
        protocol: context.explicitProtocol,
      })
    : undefined;
  let contextId = options.context;
  if (target?.kind === "thread") {
    if (contextId && contextId !== target.contextId) {
      throw new UsageError(`--to ${target.contextId} and --context ${contextId} name different threads`);
    }
    contextId = target.contextId;
  }
  const conversation = createConversation(backendFor(context, target), { contextId });
  const stopSpinner = json ? () => {} : startSpinner(`waiting for ${options.to ?? "the default agent"}`);
  let endsWithNewline = true;
  try {
    for await (const event of conversation.stream(text)) {
      if (event.type === "delta") {
        stopSpinner();
        if (json) jsonLine({ type: "delta", text: event.text });
        else process.stdout.write(terminalText(event.text));
        endsWithNewline = event.text.endsWith("\n");
      } else if (event.type === "status") {
        if (json) jsonLine({ type: "status", state: taskStateName(event.state), text: event.text });
      } else {
        stopSpinner();
        const state = event.task.status?.state ?? TaskState.UNSPECIFIED;
        if (json) {
          jsonLine({
            type: "done",
            contextId: event.task.contextId,
            taskId: event.task.id,
            state: taskStateName(state),
            text: event.text,
            task: toJson(TaskSchema, event.task),
          });
        } else {
          if (!endsWithNewline) process.stdout.write("\n");
          if (process.stderr.isTTY) {
            const needsInput = state === TaskState.INPUT_REQUIRED ? "the agent needs input; " : "";
            process.stderr.write(`parley: ${needsInput}continue with --context ${terminalId(event.task.contextId)}\n`);
          }
        }
      }
    }
  } finally {
    stopSpinner();
  }
  return ExitCode.ok;
}

/** Adds `parley send [--to TARGET] [--context ID] TEXT` and `parley send --list`. */
export function registerSendCommand(program: Command, run: RunCommand): Command {
  return program
    .command("send")
    .description("Send TEXT to a target and stream the reply to stdout")
    .argument("[text]", 'the message; "-" reads it from stdin')
    .option(
      "--to <target>",
      "a name, a2a:PEER (client config first, then the server's peers), agent:NAME, ctx-ID or thread:ID (any live thread), http(s)://URL (JSON-RPC; HTTP+JSON with --protocol rest) or grpc://HOST:PORT; a bare name that matches more than one is refused; default: the server's default agent",
    )
    .option("--context <id>", "continue (or start) the thread with this contextId", parseContextId)
    .option("--json", "print JSON lines (delta, status, done) instead of text")
    .option("--list", "list the known targets: configured peers, the server's agents and peers, live threads")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((text: string | undefined, options: SendOptions) => run((context) => runSend(context, text, options)));
}
