import { toJson } from "@bufbuild/protobuf";
import { Provenance, Role, ThreadSchema } from "@parley/proto";
import type { Command } from "commander";
import { alignedRows } from "../aligned-rows.js";
import { createConversation, partsText } from "../conversation.js";
import { ExitCode } from "../errors.js";
import { terminalId, terminalText } from "../terminal-text.js";
import type { RunCommand } from "./command-context.js";
import { parseContextId } from "./context-id-argument.js";
import { exitCodeHelp, jsonLine } from "./output.js";
import { addPagingOptions, type PagingOptions, printPages } from "./paging.js";

/** The server's page size maximums (proto/parley/v1/thread.proto): larger requests are refused, so the CLI pages. */
const listThreadsMax = 100;
const historyMax = 500;

const roleNames: Readonly<Record<number, string>> = { [Role.USER]: "user", [Role.AGENT]: "agent" };

/** Adds `parley threads list|show|delete`. */
export function registerThreadsCommand(program: Command, run: RunCommand): Command {
  const threads = program
    .command("threads")
    .description("List, show and delete the threads of your tenant")
    .addHelpText("after", exitCodeHelp)
    .exitOverride();

  addPagingOptions(
    threads.command("list").description("List threads, most recently updated first, 20 unless --limit or --all"),
    "threads",
    20,
  )
    .option("--json", "print one JSON object per line (and a last {nextPageToken} line when there are more)")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((options: PagingOptions & { json?: boolean }) =>
      run(async (context) => {
        const client = context.client();
        const rows: string[][] = [];
        const { printed } = await printPages(
          options,
          { defaultLimit: 20, serverMax: listThreadsMax },
          async (pageSize, pageToken) => {
            const response = await client.threads.listThreads({ pageSize, pageToken });
            return { items: response.threads, nextPageToken: response.nextPageToken };
          },
          (t) => {
            if (options.json) jsonLine(toJson(ThreadSchema, t));
            else {
              const updated = t.updateTime ? new Date(Number(t.updateTime.seconds) * 1000).toISOString() : "";
              rows.push([terminalId(t.contextId), String(t.messageCount), updated]);
            }
          },
          () => {
            if (rows.length > 0) {
              process.stdout.write(
                alignedRows([["CONTEXT ID", "MESSAGES", "UPDATED"], ...rows], ["left", "right", "left"]),
              );
            }
          },
        );
        if (!options.json && printed === 0) process.stdout.write("no threads\n");
        return ExitCode.ok;
      }),
    );

  addPagingOptions(
    threads
      .command("show")
      .description("Show a thread's messages, newest first unless --oldest-first, 50 unless --limit or --all")
      .argument("<contextId>", "the thread's contextId", parseContextId)
      .option("--oldest-first", "oldest message first (a --page-token must come from the same order)"),
    "messages",
    50,
  )
    .option("--json", "print one JSON object per message (and a last {nextPageToken} line when there are more)")
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((contextId: string, options: PagingOptions & { oldestFirst?: boolean; json?: boolean }) =>
      run(async (context) => {
        const conversation = createConversation(context.client(), { contextId });
        const order = options.oldestFirst ? "oldest-first" : "newest-first";
        await printPages(
          options,
          { defaultLimit: 50, serverMax: historyMax },
          async (pageSize, pageToken) => {
            const page = await conversation.history({ order, pageSize, pageToken });
            return { items: page.messages, nextPageToken: page.nextPageToken };
          },
          (m) => {
            const role = roleNames[m.message?.role ?? Role.UNSPECIFIED] ?? "unknown";
            const text = partsText(m.message?.parts ?? []);
            // An imported message's origin is the operator's word (a legacy log), so it is labelled as such.
            const imported = m.provenance === Provenance.IMPORTED;
            if (options.json) jsonLine({ sequence: Number(m.sequence), role, text, ...(imported ? { imported } : {}) });
            else {
              const label = `[${m.sequence}] ${role}${imported ? " (imported)" : ""}`;
              process.stdout.write(`${label}: ${terminalText(text)}\n`);
            }
          },
        );
        return ExitCode.ok;
      }),
    );

  threads
    .command("delete")
    .description("Delete a thread with everything of it: messages, tasks, push configs, sessions")
    .argument("<contextId>", "the thread's contextId", parseContextId)
    .addHelpText("after", exitCodeHelp)
    .exitOverride()
    .action((contextId: string) =>
      run(async (context) => {
        const response = await context.client().threads.deleteThread({ contextId });
        if (!response.deleted) {
          process.stderr.write(`parley: no thread ${terminalId(contextId)} for this tenant\n`);
          return ExitCode.notFound;
        }
        process.stdout.write(
          `deleted ${terminalId(contextId)} (${response.deletedMessageCount} messages, ${response.deletedTaskCount} tasks, ${response.deletedSessionCount} sessions)\n`,
        );
        return ExitCode.ok;
      }),
    );

  return threads;
}
