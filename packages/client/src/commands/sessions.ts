import { toJson } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ConversationState,
  type ConversationSummary,
  ConversationSummarySchema,
  ConverseEventSchema,
  StopReason,
} from "@parley/proto";
import { type Command, InvalidArgumentError, Option } from "commander";
import { ExitCode, UsageError } from "../errors.js";
import { terminalId, terminalText } from "../terminal-text.js";
import type { RunCommand } from "./command-context.js";
import { formatConverseEvent } from "./converse.js";
import { exitCodeHelp, jsonLine } from "./output.js";
import { addPagingOptions, type PagingOptions, printPages } from "./paging.js";

/** ListConversations' maximum page size (proto/parley/v1/session.proto). */
const listMax = 100;

const states: Readonly<Record<string, ConversationState>> = {
  running: ConversationState.RUNNING,
  done: ConversationState.DONE,
};

/** Stop reasons as the listing prints them: `TURN_LIMIT` as `turn-limit`. */
function stopName(reason: StopReason): string {
  return reason === StopReason.UNSPECIFIED
    ? "-"
    : (StopReason[reason] ?? String(reason)).toLowerCase().replace(/_/g, "-");
}

function stateName(state: ConversationState): string {
  return state === ConversationState.RUNNING ? "running" : state === ConversationState.DONE ? "done" : "unknown";
}

/** The columns of `sessions list`: every one but the last (agents) has a fixed width, so the rows line up. */
const columns = [
  { title: "ID", width: 41 },
  { title: "STATE", width: 7 },
  { title: "UPDATED", width: 24 },
  { title: "STEPS", width: 5, right: true },
  { title: "STOP", width: 13 },
  { title: "REQUESTER -> TARGET", width: 0 },
] as const;

function row(cells: readonly string[]): string {
  return `${cells
    .map((cell, i) => {
      const column = columns[i]!;
      if (column.width === 0) return cell;
      return "right" in column && column.right ? cell.padStart(column.width) : cell.padEnd(column.width);
    })
    .join("  ")
    .trimEnd()}\n`;
}

function summaryRow(s: ConversationSummary): string {
  const updated = s.updateTime ? timestampDate(s.updateTime).toISOString() : "";
  return row([
    terminalId(s.conversationId),
    stateName(s.state),
    updated,
    String(s.eventCount),
    stopName(s.stopReason),
    `${terminalText(s.requesterAgent)}/${terminalId(s.requesterContextId)} -> ${terminalText(s.targetAgent)}/${terminalId(s.targetContextId)}`,
  ]);
}

function parseState(value: string): ConversationState {
  const state = states[value];
  if (state === undefined) throw new InvalidArgumentError(`expected running or done, got ${JSON.stringify(value)}`);
  return state;
}

/** Adds `parley sessions list|show`. */
export function registerSessionsCommand(program: Command, run: RunCommand): Command {
  const sessions = program
    .command("sessions")
    .description("List and show the agent-to-agent sessions (conversations) of your tenant")
    .addHelpText("after", exitCodeHelp)
    .exitOverride();

  addPagingOptions(
    sessions.command("list").description("List sessions, newest first, 20 unless --limit or --all"),
    "sessions",
    20,
  )
    .addOption(new Option("--state <state>", "only sessions in this state: running or done").argParser(parseState))
    .option("--agent <name>", "only sessions with this agent (a hosted agent, or a peer) on either side")
    .option("--json", "print one JSON object per line (and a last {nextPageToken} line when there are more)")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((options: PagingOptions & { json?: boolean; state?: ConversationState; agent?: string }) =>
      run(async (context) => {
        if (options.agent !== undefined && options.agent.trim() === "") throw new UsageError("--agent is empty");
        const client = context.client();
        let header = !options.json;
        const { printed } = await printPages(
          options,
          { defaultLimit: 20, serverMax: listMax },
          async (pageSize, pageToken) => {
            const response = await client.sessions.listConversations({
              pageSize,
              pageToken,
              ...(options.state !== undefined ? { state: options.state } : {}),
              ...(options.agent !== undefined ? { agent: options.agent } : {}),
            });
            return { items: response.conversations, nextPageToken: response.nextPageToken };
          },
          (s) => {
            if (options.json) {
              jsonLine(toJson(ConversationSummarySchema, s));
              return;
            }
            if (header) process.stdout.write(row(columns.map((c) => c.title)));
            header = false;
            process.stdout.write(summaryRow(s));
          },
        );
        if (!options.json && printed === 0) process.stdout.write("no sessions\n");
        return ExitCode.ok;
      }),
    );

  sessions
    .command("show")
    .description("Show a session's steps, oldest first")
    .argument("<conversationId>", "the session's id, as `sessions list` prints it")
    .option("--json", "print one JSON object per step")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((conversationId: string, options: { json?: boolean }) =>
      run(async (context) => {
        if (conversationId.trim() === "") throw new UsageError("conversationId is empty");
        let conversation: Awaited<ReturnType<ReturnType<typeof context.client>["sessions"]["getConversation"]>>;
        try {
          conversation = await context.client().sessions.getConversation({ conversationId });
        } catch (error) {
          if (error instanceof ConnectError && error.code === Code.NotFound) {
            process.stderr.write(`parley: no session ${terminalId(conversationId)} for this tenant\n`);
            return ExitCode.notFound;
          }
          throw error;
        }
        const events = conversation.conversation?.events ?? [];
        for (const event of events) {
          if (options.json) jsonLine(toJson(ConverseEventSchema, event));
          else process.stdout.write(`${formatConverseEvent(event)}\n`);
        }
        if (!options.json) {
          process.stdout.write(`(${stateName(conversation.conversation?.state ?? ConversationState.UNSPECIFIED)})\n`);
        }
        return ExitCode.ok;
      }),
    );

  return sessions;
}
