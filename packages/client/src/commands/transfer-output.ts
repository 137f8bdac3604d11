// What the export and import commands share: writing a file whole or not at all, reading one, and the exit code
// of a refused import.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { Code, ConnectError } from "@connectrpc/connect";
import { ExitCode, UsageError } from "../errors.js";
import { terminalText } from "../terminal-text.js";
import { ThreadFileError } from "../thread-file.js";
import type { ImportTotals } from "../thread-transfer.js";
import { totalsText } from "../thread-transfer.js";
import { jsonLine } from "./output.js";

/** The file name that stands for standard input (imports) or standard output (`--out`). */
export const stdio = "-";

/**
 * Writes to `out` through a temporary file renamed into place, so a failed export leaves no partial file; or to
 * stdout when `out` is absent or `-`.
 */
export function writeExport(out: string | undefined, lines: readonly string[]): void {
  if (out === undefined || out === stdio) {
    process.stdout.write(lines.join(""));
    return;
  }
  const temporary = `${out}.partial-${process.pid}`;
  writeFileSync(temporary, lines.join(""));
  renameSync(temporary, out);
}

/** The text of a file to import (`-`: standard input, read to its end); its name goes into every line-numbered error. */
export function readImportFile(file: string): string {
  try {
    return readFileSync(file === stdio ? 0 : file, "utf8");
  } catch (error) {
    // A FILE argument that cannot be read is the command line's mistake, like an unreadable --config.
    throw new UsageError(`cannot read ${fileLabel(file)}: ${(error as Error).message}`);
  }
}

/** How errors name a file: `-` is standard input. */
export function fileLabel(file: string): string {
  return file === stdio ? "standard input" : file;
}

/** Prefixes a file error with the file name (`FILE:LINE: reason`). */
export function inFile<T>(file: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof ThreadFileError) throw new ThreadFileError(error.line, error.reason, fileLabel(file));
    throw error;
  }
}

/**
 * Runs an import and prints its totals; a refusal to merge (FAILED_PRECONDITION:
 * the thread holds other messages, or a task id is another thread's) exits 4,
 * a conflict, like a busy thread.
 */
export async function reportImport(json: boolean | undefined, work: () => Promise<ImportTotals[]>): Promise<number> {
  let results: ImportTotals[];
  try {
    results = await work();
  } catch (error) {
    if (error instanceof ConnectError && error.code === Code.FailedPrecondition) {
      process.stderr.write(`parley: ${terminalText(error.rawMessage)} (${Code[error.code]})\n`);
      if (json) jsonLine({ type: "error", exitCode: ExitCode.busy, message: error.rawMessage });
      return ExitCode.busy;
    }
    throw error;
  }
  for (const t of results) {
    if (json) jsonLine({ type: "imported", ...t });
    else process.stdout.write(totalsText(t));
  }
  return ExitCode.ok;
}
