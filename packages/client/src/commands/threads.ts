import { toJson } from "@bufbuild/protobuf";
import { Provenance, Role, ThreadSchema } from "@parley/proto";
import { type Command, InvalidArgumentError } from "commander";
import { createConversation, partsText } from "../conversation.js";
import { ExitCode } from "../errors.js";
import type { RunCommand } from "./command-context.js";
import { exitCodeHelp, jsonLine } from "./output.js";

function parseLimit(max: number) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > max) {
      throw new InvalidArgumentError(`expected a whole number from 1 to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };
}

const roleNames: Readonly<Record<number, string>> = { [Role.USER]: "user", [Role.AGENT]: "agent" };

/** Adds `parley threads list|show|delete`. */
export function registerThreadsCommand(program: Command, run: RunCommand): Command {
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
      run(async (context) => {
        const response = await context.client().threads.listThreads({ pageSize: options.limit ?? 0 });
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
      run(async (context) => {
        const conversation = createConversation(context.client(), { contextId });
        const page = await conversation.history({
          order: options.oldestFirst ? "oldest-first" : "newest-first",
          pageSize: options.limit,
        });
        for (const m of page.messages) {
          const role = roleNames[m.message?.role ?? Role.UNSPECIFIED] ?? "unknown";
          const text = partsText(m.message?.parts ?? []);
          // An imported message's origin is the operator's word (a legacy log), so it is labelled as such.
          const imported = m.provenance === Provenance.IMPORTED;
          if (options.json) jsonLine({ sequence: Number(m.sequence), role, text, ...(imported ? { imported } : {}) });
          else process.stdout.write(`[${m.sequence}] ${role}${imported ? " (imported)" : ""}: ${text}\n`);
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
      run(async (context) => {
        const response = await context.client().threads.deleteThread({ contextId });
        if (!response.deleted) {
          process.stderr.write(`parley: no thread ${contextId} for this tenant\n`);
          return ExitCode.notFound;
        }
        process.stdout.write(`deleted ${contextId} (${response.deletedMessageCount} messages)\n`);
        return ExitCode.ok;
      }),
    );

  return threads;
}
