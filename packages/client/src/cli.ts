#!/usr/bin/env node
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { Role, TaskSchema, TaskState, ThreadSchema } from "@parley/proto";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { createParleyClient, type ParleyClient, type ParleyProtocol, parleyProtocols } from "./client.js";
import { registerConverseCommand } from "./commands/converse.js";
import { type ClientConfig, loadClientConfig } from "./config.js";
import { type ConversationBackend, createConversation, partsText, taskStateName } from "./conversation.js";
import { ExitCode, exitCodeOf, UsageError } from "./errors.js";
import { createJsonRpcA2AClient } from "./json-rpc-client.js";
import { formatKnownTargets, listTargets, type ResolvedTarget, resolveTarget } from "./targets.js";

const exitCodeHelp = `
Exit codes:
  0  ok
  1  remote or agent error (server unreachable, failed task, ...)
  2  usage error (bad flags or arguments, bad config file, ambiguous target)
  3  target, peer or thread not found
  4  busy or conflict (another task is running in that thread)`;

interface GlobalOptions {
  server?: string;
  protocol?: ParleyProtocol;
  token?: string;
  config?: string;
}

/** Everything a command needs, closed once the command is done so no HTTP/2 session keeps the process alive. */
class Session {
  private readonly clients: ParleyClient[] = [];
  readonly config: ClientConfig;
  readonly explicitProtocol: ParleyProtocol | undefined;

  constructor(options: GlobalOptions) {
    this.config = loadClientConfig({
      path: options.config,
      overrides: { server: options.server, protocol: options.protocol, token: options.token },
    });
    this.explicitProtocol = options.protocol;
  }

  client(options: { baseUrl?: string; protocol?: ParleyProtocol; token?: string; agent?: string } = {}): ParleyClient {
    const client = createParleyClient({
      baseUrl: options.baseUrl ?? this.config.server,
      protocol: options.protocol ?? this.config.protocol,
      token: options.baseUrl ? options.token : (options.token ?? this.config.token),
      agent: options.agent,
    });
    this.clients.push(client);
    return client;
  }

  close() {
    for (const client of this.clients) client.close();
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function jsonLine(value: unknown) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

function parseLimit(max: number) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > max) {
      throw new InvalidArgumentError(`expected a whole number from 1 to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };
}

/** A spinner on stderr until the first chunk; only for a person watching a terminal. */
function startSpinner(label: string): () => void {
  if (!process.stderr.isTTY) return () => {};
  const frames = ["|", "/", "-", "\\"];
  let i = 0;
  const timer = setInterval(() => process.stderr.write(`\r${frames[i++ % frames.length]} ${label}`), 100);
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    process.stderr.write("\r\x1b[K");
  };
}

function backendFor(session: Session, target: ResolvedTarget | undefined): ConversationBackend {
  if (!target) return session.client();
  switch (target.kind) {
    case "agent":
      return session.client({ agent: target.agent });
    case "thread":
      return session.client();
    case "endpoint":
      if (target.protocol === "jsonrpc")
        return { a2a: createJsonRpcA2AClient({ url: target.url, token: target.token }) };
      return session.client({ baseUrl: target.url, protocol: target.protocol, token: target.token });
  }
}

interface SendOptions {
  to?: string;
  context?: string;
  json?: boolean;
  list?: boolean;
}

async function runList(session: Session, json: boolean): Promise<number> {
  const listing = await listTargets(session.config, session.client());
  if (json) for (const t of listing.targets) jsonLine(t);
  else if (listing.targets.length === 0) process.stdout.write("no targets: no peers configured and no live threads\n");
  else process.stdout.write(`${formatKnownTargets(listing.targets).join("\n")}\n`);
  if (listing.problem) {
    process.stderr.write(`parley: the server's agents and threads are missing: ${listing.problem}\n`);
    return ExitCode.remote;
  }
  return ExitCode.ok;
}

async function runSend(session: Session, textArg: string | undefined, options: SendOptions): Promise<number> {
  const json = options.json === true;
  if (options.list) {
    if (textArg !== undefined) throw new UsageError("send --list takes no TEXT");
    return runList(session, json);
  }
  if (textArg === undefined) throw new UsageError("send needs TEXT (or - to read it from stdin), or --list");
  const text = textArg === "-" ? await readStdin() : textArg;
  if (text.trim() === "") throw new UsageError(textArg === "-" ? "stdin held no text to send" : "TEXT is empty");

  const target = options.to
    ? await resolveTarget(options.to, {
        config: session.config,
        server: session.client(),
        protocol: session.explicitProtocol,
      })
    : undefined;
  let contextId = options.context;
  if (target?.kind === "thread") {
    if (contextId && contextId !== target.contextId) {
      throw new UsageError(`--to ${target.contextId} and --context ${contextId} name different threads`);
    }
    contextId = target.contextId;
  }
  const conversation = createConversation(backendFor(session, target), { contextId });
  const stopSpinner = json ? () => {} : startSpinner(`waiting for ${options.to ?? "the default agent"}`);
  let endsWithNewline = true;
  try {
    for await (const event of conversation.stream(text)) {
      if (event.type === "delta") {
        stopSpinner();
        if (json) jsonLine({ type: "delta", text: event.text });
        else process.stdout.write(event.text);
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
            process.stderr.write(`parley: ${needsInput}continue with --context ${event.task.contextId}\n`);
          }
        }
      }
    }
  } finally {
    stopSpinner();
  }
  return ExitCode.ok;
}

const roleNames: Readonly<Record<number, string>> = { [Role.USER]: "user", [Role.AGENT]: "agent" };

function buildProgram(run: (action: (session: Session) => Promise<number>) => Promise<void>): Command {
  const program = new Command("parley")
    .description("Talk to agents through a Parley server, or directly over A2A")
    .option("--server <url>", "Parley server URL (default: config, PARLEY_SERVER, http://127.0.0.1:8081)")
    .addOption(
      new Option("--protocol <protocol>", "wire protocol to the server and URL targets").choices(parleyProtocols),
    )
    .option("--token <token>", "bearer token for the server (default: config, PARLEY_TOKEN)")
    .option("--config <file>", "client config (default: PARLEY_CLIENT_CONFIG, ~/.config/parley/config.json)")
    .addHelpText("after", exitCodeHelp)
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();

  program
    .command("send")
    .description("Send TEXT to a target and stream the reply to stdout")
    .argument("[text]", 'the message; "-" reads it from stdin')
    .option(
      "--to <target>",
      "peer name, a2a:PEER, agent:NAME, ctx-THREAD, http(s)://URL (JSON-RPC) or grpc://HOST:PORT; default: the server's default agent",
    )
    .option("--context <id>", "continue (or start) the thread with this contextId")
    .option("--json", "print JSON lines (delta, status, done) instead of text")
    .option("--list", "list the known targets: configured peers, hosted agents, live threads")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((text: string | undefined, options: SendOptions) => run((s) => runSend(s, text, options)));

  registerConverseCommand(program, (action) => run((session) => action(() => session.client())));

  const threads = program
    .command("threads")
    .description("List, show and delete the threads of your tenant")
    .addHelpText("after", exitCodeHelp)
    .exitOverride();

  threads
    .command("list")
    .description("List threads, most recently updated first")
    .option("--limit <n>", "how many threads (1-100)", parseLimit(100))
    .option("--json", "print one JSON object per line")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((options: { limit?: number; json?: boolean }) =>
      run(async (session) => {
        const response = await session.client().threads.listThreads({ pageSize: options.limit ?? 0 });
        for (const t of response.threads) {
          if (options.json) jsonLine(toJson(ThreadSchema, t));
          else {
            const updated = t.updateTime ? new Date(Number(t.updateTime.seconds) * 1000).toISOString() : "";
            process.stdout.write(`${t.contextId}  ${t.messageCount} messages  ${updated}\n`);
          }
        }
        if (!options.json && response.threads.length === 0) process.stdout.write("no threads\n");
        return ExitCode.ok;
      }),
    );

  threads
    .command("show")
    .description("Show a thread's messages, newest first unless --oldest-first")
    .argument("<contextId>", "the thread's contextId")
    .option("--oldest-first", "oldest message first")
    .option("--limit <n>", "how many messages (1-500, default 50)", parseLimit(500))
    .option("--json", "print one JSON object per message")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((contextId: string, options: { oldestFirst?: boolean; limit?: number; json?: boolean }) =>
      run(async (session) => {
        const conversation = createConversation(session.client(), { contextId });
        const page = await conversation.history({
          order: options.oldestFirst ? "oldest-first" : "newest-first",
          pageSize: options.limit,
        });
        for (const m of page.messages) {
          const role = roleNames[m.message?.role ?? Role.UNSPECIFIED] ?? "unknown";
          const text = partsText(m.message?.parts ?? []);
          if (options.json) jsonLine({ sequence: Number(m.sequence), role, text });
          else process.stdout.write(`[${m.sequence}] ${role}: ${text}\n`);
        }
        return ExitCode.ok;
      }),
    );

  threads
    .command("delete")
    .description("Delete a thread and all its messages")
    .argument("<contextId>", "the thread's contextId")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((contextId: string) =>
      run(async (session) => {
        const response = await session.client().threads.deleteThread({ contextId });
        if (!response.deleted) {
          process.stderr.write(`parley: no thread ${contextId} for this tenant\n`);
          return ExitCode.notFound;
        }
        process.stdout.write(`deleted ${contextId} (${response.deletedMessageCount} messages)\n`);
        return ExitCode.ok;
      }),
    );

  return program;
}

async function main(argv: string[]): Promise<number> {
  // A reader that stops early (parley ... | head) is not an error of ours.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(ExitCode.ok);
    throw error;
  });
  let exitCode: number = ExitCode.ok;
  let json = false;
  const program: Command = buildProgram(async (action) => {
    const options = program.opts<GlobalOptions>();
    json = argv.includes("--json");
    let session: Session | undefined;
    try {
      session = new Session(options);
      exitCode = await action(session);
    } catch (error) {
      exitCode = exitCodeOf(error);
      const message = error instanceof ConnectError ? error.rawMessage : (error as Error).message;
      const code = error instanceof ConnectError ? ` (${Code[error.code]})` : "";
      process.stderr.write(`parley: ${message}${code}\n`);
      if (json) jsonLine({ type: "error", exitCode, message });
    } finally {
      session?.close();
    }
  });
  if (argv.length <= 2) {
    program.outputHelp();
    return ExitCode.usage;
  }
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    throw error;
  }
  return exitCode;
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`parley: unexpected failure: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = ExitCode.remote;
  },
);
