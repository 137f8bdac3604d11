import { type MessageInitShape, toJson } from "@bufbuild/protobuf";
import {
  type ConverseEvent,
  ConverseEventSchema,
  type ConverseRequestSchema,
  Phase,
  type SessionRef,
  Speaker,
  StopReason,
} from "@parley/proto";
import { type Command, InvalidArgumentError } from "commander";
import type { ParleyClient } from "../client.js";
import { ExitCode, UsageError } from "../errors.js";
import { terminalId, terminalText } from "../terminal-text.js";
import type { RunCommand } from "./command-context.js";

/** A SessionRef in the CLI's SESSION syntax: agent[/contextId], a2a:peer[/contextId] or a2a:URL[#contextId]. */
export function parseSession(spec: string, flag: string): Pick<SessionRef, "endpoint" | "contextId"> {
  const trimmed = spec.trim();
  if (trimmed === "") throw new UsageError(`${flag} is empty: use agent[/contextId] or a2a:peer[/contextId]`);
  if (trimmed.startsWith("a2a:")) {
    const rest = trimmed.slice(4);
    const cut = rest.includes("://") ? rest.indexOf("#") : rest.indexOf("/");
    const peer = cut < 0 ? rest : rest.slice(0, cut);
    if (peer === "") throw new UsageError(`${flag} ${JSON.stringify(spec)} names no peer after a2a:`);
    return { endpoint: { case: "peer", value: peer }, contextId: cut < 0 ? "" : rest.slice(cut + 1) };
  }
  const slash = trimmed.indexOf("/");
  return {
    endpoint: { case: "agent", value: slash < 0 ? trimmed : trimmed.slice(0, slash) },
    contextId: slash < 0 ? "" : trimmed.slice(slash + 1),
  };
}

function nonNegativeInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${flag} must be a non-negative integer`);
    return n;
  };
}

const phaseLabels: Readonly<Record<number, string>> = {
  [Phase.ACCEPTED]: "accepted",
  [Phase.ROUND_ONE]: "round one",
  [Phase.ANNOUNCE]: "announce",
  [Phase.DONE]: "done",
};

const speakerNames: Readonly<Record<number, string>> = {
  [Speaker.REQUESTER]: "requester",
  [Speaker.TARGET]: "target",
};

/** One human-readable line per conversation step. */
export function formatConverseEvent(event: ConverseEvent): string {
  const label = event.phase === Phase.PING_PONG ? `turn ${event.turn}/${event.maxTurns}` : phaseLabels[event.phase];
  switch (event.phase) {
    case Phase.ACCEPTED:
      return `[${label}] ${terminalId(event.conversationId)}: ${terminalText(event.detail)}`;
    case Phase.DONE: {
      const announced = event.announcedText !== "" ? `\n  announced: ${terminalText(event.announcedText)}` : "";
      return `[${label}] ${StopReason[event.stopReason]}: ${terminalText(event.detail)}${announced}`;
    }
    default: {
      const said = event.silent ? "(silent)" : event.text === "" ? "(empty)" : terminalText(event.text);
      return `[${label}] ${speakerNames[event.speaker] ?? "?"}: ${said}`;
    }
  }
}

interface ConverseOptions {
  from: string;
  to: string;
  turns?: number;
  stepTimeout?: number;
  requestId?: string;
  detach?: boolean;
  json?: boolean;
}

/** Stop reasons that mean something broke rather than the conversation running its course. */
const failures: ReadonlySet<StopReason> = new Set([StopReason.AGENT_FAILED, StopReason.CANCELED]);

export async function runConverse(client: ParleyClient, text: string, options: ConverseOptions): Promise<number> {
  if (text.trim() === "") throw new UsageError("TEXT is empty");
  const request: MessageInitShape<typeof ConverseRequestSchema> = {
    requester: parseSession(options.from, "--from"),
    target: parseSession(options.to, "--to"),
    text,
    requestId: options.requestId ?? "",
    ...(options.turns !== undefined ? { maxTurns: options.turns } : {}),
    ...(options.stepTimeout !== undefined ? { stepTimeoutMs: options.stepTimeout } : {}),
    ...(options.detach ? { waitMs: 0 } : {}),
  };
  let last: ConverseEvent | undefined;
  for await (const { event } of client.sessions.converse(request)) {
    if (!event) continue;
    last = event;
    process.stdout.write(
      options.json ? `${JSON.stringify(toJson(ConverseEventSchema, event))}\n` : `${formatConverseEvent(event)}\n`,
    );
  }
  if (options.detach && last && !options.json) {
    process.stderr.write(`parley: the conversation runs on; its id is ${terminalId(last.conversationId)}\n`);
  }
  return last?.phase === Phase.DONE && failures.has(last.stopReason) ? ExitCode.remote : ExitCode.ok;
}

/** Adds `parley converse --from SESSION --to SESSION TEXT`. */
export function registerConverseCommand(program: Command, run: RunCommand): Command {
  return program
    .command("converse")
    .description("Open an agent-to-agent conversation between two sessions and print each step as it happens")
    .argument("<text>", "the request the target session answers first")
    .requiredOption("--from <session>", "the requester: agent[/contextId], a2a:peer[/contextId] or a2a:URL[#contextId]")
    .requiredOption("--to <session>", "the target, same syntax as --from")
    .option(
      "--turns <n>",
      "ping-pong turns after round one (server default 5, capped by the server)",
      nonNegativeInt("--turns"),
    )
    .option("--step-timeout <ms>", "how long one agent step may take", nonNegativeInt("--step-timeout"))
    .option("--request-id <id>", "makes a retried command attach to the same conversation instead of starting another")
    .option("--detach", "print the accepted step and leave the conversation running")
    .option("--json", "print each step as a JSON object per line")
    .exitOverride()
    .action((text: string, options: ConverseOptions) => run((context) => runConverse(context.client(), text, options)));
}
