// `parley threads export|import|import-legacy`: one thread to a parley.thread file and back, and old chat logs in.
import { type Command, InvalidArgumentError } from "commander";
import { ExitCode } from "../errors.js";
import { legacyRecords } from "../legacy-log.js";
import { parseThreadFile } from "../thread-file.js";
import { defaultBatchBytes, exportThreadLines, importThreadRecords } from "../thread-transfer.js";
import type { RunCommand } from "./command-context.js";
import { parseContextId } from "./context-id-argument.js";
import { exitCodeHelp } from "./output.js";
import { inFile, readImportFile, reportImport, writeExport } from "./transfer-output.js";

export function parseBatchBytes(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1024) {
    throw new InvalidArgumentError(`expected a whole number of bytes >= 1024, got ${JSON.stringify(value)}`);
  }
  return n;
}

const formatHelp = `
File format: parley.thread version 1, JSON Lines (see packages/client/README.md, "Thread files"):
a header line, one line per message (oldest first), one per task, an end line.
`;

/** Adds export, import and import-legacy under `parley threads`. */
export function registerThreadTransferCommands(threads: Command, run: RunCommand): void {
  threads
    .command("export")
    .description("Write a thread, losslessly, as a parley.thread JSONL file")
    .argument("<contextId>", "the thread's contextId", parseContextId)
    .option("--out <file>", "write to this file (whole or not at all) instead of stdout; - is stdout")
    .addHelpText("after", formatHelp + exitCodeHelp)
    .exitOverride()
    .action((contextId: string, options: { out?: string }) =>
      run(async (context) => {
        writeExport(options.out, await exportThreadLines(context.client(), contextId));
        return ExitCode.ok;
      }),
    );

  threads
    .command("import")
    .description("Import a parley.thread file (idempotent: what the thread already holds is skipped)")
    .argument("<file>", "a file written by parley threads export, or - for standard input")
    .option("--context <id>", "import into this contextId instead of the one in the header", parseContextId)
    .option("--append", "add the file's messages after the thread's own when it holds other messages")
    .option("--batch-bytes <n>", `largest request in bytes (default ${defaultBatchBytes})`, parseBatchBytes)
    .option("--json", "print the totals as one JSON object")
    .addHelpText("after", formatHelp + exitCodeHelp)
    .exitOverride()
    .action((file: string, options: { context?: string; append?: boolean; batchBytes?: number; json?: boolean }) =>
      run(async (context) => {
        const exported = inFile(file, () => parseThreadFile(readImportFile(file)));
        return reportImport(options.json, async () => [
          await importThreadRecords(context.client(), exported.records, {
            ...(options.context !== undefined ? { contextId: options.context } : {}),
            append: options.append === true,
            ...(options.batchBytes !== undefined ? { batchBytes: options.batchBytes } : {}),
          }),
        ]);
      }),
    );

  threads
    .command("import-legacy")
    .description("Import a plain JSONL chat log ({role, content, timestamp?} per line) into a thread you name")
    .argument("<file>", "the log file, or - for standard input")
    .requiredOption(
      "--context <id>",
      "the contextId the log belongs to (never taken from the file name)",
      parseContextId,
    )
    .option("--append", "add the log's messages after the thread's own when it holds other messages")
    .option("--json", "print the totals as one JSON object")
    .addHelpText(
      "after",
      `
Every message is stored with provenance IMPORTED (shown as such by threads show and in the
history block agents see), with the log's line and original object in its metadata. The
log's role must be user, assistant or agent; timestamp is ISO 8601, or a number of seconds
since 1970 (milliseconds when it is 1e11 or more). Importing the same log again adds nothing.
${exitCodeHelp}`,
    )
    .exitOverride()
    .action((file: string, options: { context: string; append?: boolean; json?: boolean }) =>
      run(async (context) => {
        const records = inFile(file, () => legacyRecords(readImportFile(file), options.context, Date.now()));
        return reportImport(options.json, async () => [
          await importThreadRecords(context.client(), records, {
            contextId: options.context,
            append: options.append === true,
          }),
        ]);
      }),
    );
}
