// Moving threads through a Parley server: an export read into lines, an import sent in requests that fit the
// server's request size limit. Used by the `parley threads export|import|import-legacy` and `parley export|import`.
import { create, toBinary } from "@bufbuild/protobuf";
import { type ImportThreadResponse, type ThreadRecord, ThreadRecordSchema } from "@parley/proto";
import type { ParleyClient } from "./client.js";
import { terminalId } from "./terminal-text.js";
import { recordLine } from "./thread-file.js";

/** The default request budget: half the server's default limits.maxMessageBytes (1 MiB), for the framing. */
export const defaultBatchBytes = 512 * 1024;

/** The lines of a thread's export, in file order (the server streams them; they are collected here). */
export async function exportThreadLines(client: ParleyClient, contextId: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const response of client.threads.exportThread({ contextId })) {
    const record = response.record;
    if (!record) continue;
    try {
      lines.push(recordLine(record));
    } catch (error) {
      // ProtoJSON cannot write every binary message (a google.protobuf.Value with no kind set, for one).
      const what = record.record.case === "message" ? `message ${record.record.value.sequence}` : record.record.case;
      throw new Error(`${contextId}: ${what} cannot be written as ProtoJSON: ${(error as Error).message}`);
    }
  }
  return lines;
}

export interface ImportTotals {
  contextId: string;
  addedMessages: number;
  skippedMessages: number;
  addedTasks: number;
  skippedTasks: number;
}

function add(totals: ImportTotals, r: ImportThreadResponse): void {
  totals.contextId = r.contextId;
  totals.addedMessages += Number(r.addedMessageCount);
  totals.skippedMessages += Number(r.skippedMessageCount);
  totals.addedTasks += Number(r.addedTaskCount);
  totals.skippedTasks += Number(r.skippedTaskCount);
}

/**
 * Imports one thread's checked records. They go in one request when they fit
 * `batchBytes`, which is then one atomic write. A larger export goes in
 * several, each with the header: the first with the caller's `append`, the
 * later ones appending (they follow the first's messages). Each is idempotent,
 * so an import cut off half way is finished by running it again.
 */
export async function importThreadRecords(
  client: ParleyClient,
  records: readonly ThreadRecord[],
  options: { contextId?: string; append: boolean; batchBytes?: number },
): Promise<ImportTotals> {
  const budget = options.batchBytes ?? defaultBatchBytes;
  const [header, ...body] = records;
  const totals: ImportTotals = { contextId: "", addedMessages: 0, skippedMessages: 0, addedTasks: 0, skippedTasks: 0 };
  const send = async (batch: ThreadRecord[], append: boolean) =>
    add(
      totals,
      await client.threads.importThread({ contextId: options.contextId ?? "", records: [header!, ...batch], append }),
    );
  const sizes = body.map((r) => toBinary(ThreadRecordSchema, r).byteLength + 8);
  const headerSize = toBinary(ThreadRecordSchema, header ?? create(ThreadRecordSchema)).byteLength;
  if (sizes.reduce((a, b) => a + b, headerSize) <= budget) {
    await send(body, options.append);
    return totals;
  }
  // The end record's counts are of the whole file (checked when it was read); a part of it goes without.
  let batch: ThreadRecord[] = [];
  let bytes = headerSize;
  let first = true;
  for (const [i, r] of body.entries()) {
    if (r.record.case === "end") continue;
    const size = sizes[i]!;
    if (batch.length > 0 && bytes + size > budget) {
      await send(batch, first ? options.append : true);
      first = false;
      batch = [];
      bytes = headerSize;
    }
    batch.push(r);
    bytes += size;
  }
  if (batch.length > 0 || first) await send(batch, first ? options.append : true);
  return totals;
}

export function totalsText(t: ImportTotals): string {
  return `imported into ${terminalId(t.contextId)}: ${t.addedMessages} messages added, ${t.skippedMessages} already there; ${t.addedTasks} tasks added, ${t.skippedTasks} already there\n`;
}
