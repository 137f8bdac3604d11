// The parley.thread JSONL format (one ThreadRecord's ProtoJSON per line) and the parley.tenant format (a header
// line, then one parley.thread export after another), read with line numbers for every refusal.
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type ThreadRecord, ThreadRecordSchema } from "@parley/proto";
import { z } from "zod";
import { UsageError } from "./errors.js";

export const threadFormat = { name: "parley.thread", version: 1 } as const;
export const tenantFormat = { name: "parley.tenant", version: 1 } as const;

/** A file that cannot be imported: `line` (1-based) is where, the message says why. */
export class ThreadFileError extends UsageError {
  constructor(
    readonly line: number,
    readonly reason: string,
    file = "",
  ) {
    super(`${file ? `${file}:` : "line "}${line}: ${reason}`);
  }
}

/** One line of the file: the record's ProtoJSON, fields in declaration order, so equal data gives equal bytes. */
export function recordLine(record: ThreadRecord): string {
  return `${JSON.stringify(toJson(ThreadRecordSchema, record))}\n`;
}

/** The lines of a file with their numbers; a final newline ends the last line, it does not start an empty one. */
export function numberedLines(text: string): { line: number; text: string }[] {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines.map((t, i) => ({ line: i + 1, text: t.endsWith("\r") ? t.slice(0, -1) : t }));
}

function parseJson(line: number, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ThreadFileError(line, `not JSON (${(error as Error).message})`);
  }
}

/** One export of one thread, checked: its records in file order and the line each came from. */
export interface ThreadExport {
  readonly contextId: string;
  readonly records: ThreadRecord[];
  /** The line number of each record. */
  readonly lines: number[];
}

/**
 * Reads the records of one thread export starting at `lines[start]`; returns
 * it and the index after its end record. The header's format and version are
 * checked before the line is parsed strictly, so a newer file is refused as
 * such, not for a field this version does not know.
 */
export function readThreadExport(
  lines: readonly { line: number; text: string }[],
  start: number,
): { export: ThreadExport; next: number } {
  const first = lines[start];
  if (!first) throw new ThreadFileError((lines[lines.length - 1]?.line ?? 0) + 1, "missing the header line");
  const head = parseJson(first.line, first.text) as { header?: { format?: unknown; version?: unknown } } | null;
  const format = head?.header?.format;
  const version = head?.header?.version;
  if (format !== threadFormat.name || version !== threadFormat.version) {
    throw new ThreadFileError(
      first.line,
      head?.header === undefined
        ? `not a ${threadFormat.name} header (the first line must be {"header":{"format":"${threadFormat.name}","version":${threadFormat.version},...}})`
        : `unknown format ${JSON.stringify(format)} version ${JSON.stringify(version)}; this parley reads ${threadFormat.name} version ${threadFormat.version}`,
    );
  }
  const records: ThreadRecord[] = [];
  const numbers: number[] = [];
  let messages = 0;
  let tasks = 0;
  let lastSequence = 0n;
  for (let i = start; i < lines.length; i++) {
    const { line, text } = lines[i]!;
    let record: ThreadRecord;
    try {
      record = fromJson(ThreadRecordSchema, parseJson(line, text) as JsonValue, { ignoreUnknownFields: false });
    } catch (error) {
      if (error instanceof ThreadFileError) throw error;
      throw new ThreadFileError(line, (error as Error).message);
    }
    const r = record.record;
    const fail = (why: string) => new ThreadFileError(line, why);
    if (i === start) {
      if (r.case !== "header") throw fail("the first line must be the header");
    } else if (r.case === "header") {
      throw fail("a second header before the end line");
    } else if (r.case === "message") {
      if (tasks > 0) throw fail("a message line after the task lines");
      if (r.value.sequence <= lastSequence) throw fail(`sequence ${r.value.sequence} does not follow ${lastSequence}`);
      lastSequence = r.value.sequence;
      if (r.value.messageId === "") throw fail("messageId is required");
      if (!r.value.message) throw fail("message is required");
      if (!r.value.createTime) throw fail("createTime is required");
      if (r.value.provenance === 0) throw fail("provenance is required");
      messages += 1;
    } else if (r.case === "task") {
      if (r.value.taskId === "" || !r.value.task || !r.value.updateTime) {
        throw fail("a task line needs taskId, task and updateTime");
      }
      tasks += 1;
    } else if (r.case === "end") {
      if (r.value.messageCount !== BigInt(messages) || r.value.taskCount !== BigInt(tasks)) {
        throw fail(
          `the end line counts ${r.value.messageCount} messages and ${r.value.taskCount} tasks, but the file holds ${messages} and ${tasks}`,
        );
      }
      records.push(record);
      numbers.push(line);
      const contextId = records[0]!.record.case === "header" ? records[0]!.record.value.contextId : "";
      return { export: { contextId, records, lines: numbers }, next: i + 1 };
    } else {
      throw fail("an empty record");
    }
    records.push(record);
    numbers.push(line);
  }
  throw new ThreadFileError(
    (lines[lines.length - 1]?.line ?? 0) + 1,
    "the file ends before the end line (it is incomplete)",
  );
}

/** A whole file that must hold exactly one thread export. */
export function parseThreadFile(text: string): ThreadExport {
  const lines = numberedLines(text);
  if (lines.length === 0) throw new ThreadFileError(1, "the file is empty");
  const { export: exported, next } = readThreadExport(lines, 0);
  if (next < lines.length) throw new ThreadFileError(lines[next]!.line, "a line after the end line");
  return exported;
}

const tenantHeaderSchema = z.strictObject({
  format: z.literal(tenantFormat.name),
  version: z.literal(tenantFormat.version),
  exportTime: z.iso.datetime(),
  threadCount: z.int().min(0),
});

export type TenantHeader = z.infer<typeof tenantHeaderSchema>;

export function tenantHeaderLine(threadCount: number, exportTime: Date): string {
  const header: TenantHeader = {
    format: tenantFormat.name,
    version: tenantFormat.version,
    exportTime: exportTime.toISOString(),
    threadCount,
  };
  return `${JSON.stringify(header)}\n`;
}

/** A parley.tenant file: its header, then `threadCount` thread exports. */
export function parseTenantFile(text: string): { header: TenantHeader; threads: ThreadExport[] } {
  const lines = numberedLines(text);
  const first = lines[0];
  if (!first) throw new ThreadFileError(1, "the file is empty");
  const raw = parseJson(1, first.text) as { format?: unknown; version?: unknown; header?: unknown } | null;
  if (raw?.header !== undefined) {
    throw new ThreadFileError(
      1,
      `this is a ${threadFormat.name} file (one thread): import it with parley threads import`,
    );
  }
  if (raw?.format !== tenantFormat.name || raw?.version !== tenantFormat.version) {
    throw new ThreadFileError(
      1,
      `unknown format ${JSON.stringify(raw?.format)} version ${JSON.stringify(raw?.version)}; this parley reads ${tenantFormat.name} version ${tenantFormat.version}`,
    );
  }
  const parsed = tenantHeaderSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ThreadFileError(
      1,
      parsed.error.issues.map((i) => `${i.path.join(".") || "header"}: ${i.message}`).join("; "),
    );
  }
  const threads: ThreadExport[] = [];
  let at = 1;
  while (at < lines.length) {
    const { export: exported, next } = readThreadExport(lines, at);
    threads.push(exported);
    at = next;
  }
  if (threads.length !== parsed.data.threadCount) {
    throw new ThreadFileError(
      (lines[lines.length - 1]?.line ?? 0) + 1,
      `the header counts ${parsed.data.threadCount} threads, but the file holds ${threads.length}`,
    );
  }
  return { header: parsed.data, threads };
}
