// `parley export --all` and `parley import`: every thread of the caller's tenant to one parley.tenant file and
// back, for backups and for moving between the LevelDB and PostgreSQL backends.
import type { Command } from "commander";
import { ExitCode, UsageError } from "../errors.js";
import { parseTenantFile, tenantHeaderLine } from "../thread-file.js";
import { defaultBatchBytes, exportThreadLines, type ImportTotals, importThreadRecords } from "../thread-transfer.js";
import type { RunCommand } from "./command-context.js";
import { exitCodeHelp } from "./output.js";
import { parseBatchBytes } from "./threads-transfer.js";
import { inFile, readImportFile, reportImport, writeExport } from "./transfer-output.js";

const tenantHelp = `
File format: parley.tenant version 1: a header line {"format":"parley.tenant","version":1,
"exportTime":...,"threadCount":N}, then N parley.thread exports, by contextId. The tenant
itself is not in the file: an import writes into the tenant of the token it runs with.
`;

/** Adds `parley export --all` and `parley import`. */
export function registerTenantTransferCommands(program: Command, run: RunCommand): void {
  program
    .command("export")
    .description("Write every thread of your tenant to one file (parley.tenant JSONL)")
    .option("--all", "every thread (required: one thread is parley threads export)")
    .option("--out <file>", "write to this file (whole or not at all) instead of stdout; - is stdout")
    .addHelpText("after", tenantHelp + exitCodeHelp)
    .exitOverride()
    .action((options: { all?: boolean; out?: string }) =>
      run(async (context) => {
        if (!options.all)
          throw new UsageError("name --all to export every thread (one thread: parley threads export ID)");
        const client = context.client();
        const contextIds: string[] = [];
        let pageToken = "";
        do {
          const page = await client.threads.listThreads({ pageSize: 100, pageToken });
          for (const t of page.threads) contextIds.push(t.contextId);
          pageToken = page.nextPageToken;
        } while (pageToken !== "");
        // By contextId (UTF-16 order): the listing's order is by update time, which an import changes.
        contextIds.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        const lines: string[] = [];
        for (const contextId of contextIds) lines.push(...(await exportThreadLines(client, contextId)));
        writeExport(options.out, [tenantHeaderLine(contextIds.length, new Date()), ...lines]);
        return ExitCode.ok;
      }),
    );

  program
    .command("import")
    .description("Import a file written by parley export --all into your tenant (idempotent)")
    .argument("<file>", "a parley.tenant file, or - for standard input")
    .option("--append", "add a thread's messages after its own when it already holds other messages")
    .option("--batch-bytes <n>", `largest request in bytes (default ${defaultBatchBytes})`, parseBatchBytes)
    .option("--json", "print one JSON object per thread")
    .addHelpText("after", tenantHelp + exitCodeHelp)
    .exitOverride()
    .action((file: string, options: { append?: boolean; batchBytes?: number; json?: boolean }) =>
      run(async (context) => {
        // The whole file is checked before anything is written.
        const { threads } = inFile(file, () => parseTenantFile(readImportFile(file)));
        const client = context.client();
        return reportImport(options.json, async () => {
          const results: ImportTotals[] = [];
          for (const t of threads) {
            results.push(
              await importThreadRecords(client, t.records, {
                append: options.append === true,
                ...(options.batchBytes !== undefined ? { batchBytes: options.batchBytes } : {}),
              }),
            );
          }
          return results;
        });
      }),
    );
}
