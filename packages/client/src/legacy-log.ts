// Plain JSONL chat logs of the shape older adapters wrote (one {role, content, timestamp?} object per line, in
// files named after a sanitised contextId), turned into parley.thread records for an explicit import. The file
// name is never trusted for the context: sanitising was many-to-one, so the operator names the contextId.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Provenance, Role, type ThreadRecord, ThreadRecordSchema } from "@parley/proto";
import { z } from "zod";
import { numberedLines, ThreadFileError, threadFormat } from "./thread-file.js";

/** Where an imported message keeps what the log said of it (its line and the whole original object). */
export const importExtension = "https://parley.dev/extensions/import/v1";

const roles: Readonly<Record<string, Role>> = { user: Role.USER, assistant: Role.AGENT, agent: Role.AGENT };

// Extra keys are kept (in the message metadata), not refused: the log is old data and nothing of it is dropped.
const legacyLine = z.looseObject({
  role: z.string().refine((r) => Object.hasOwn(roles, r), {
    message: `role must be one of ${Object.keys(roles).join(", ")}`,
  }),
  content: z.string(),
  timestamp: z.union([z.string(), z.number()]).optional(),
});

/** ISO 8601 text, or a number of seconds since the epoch (Python's time.time()), or of milliseconds when >= 1e11. */
function timeOf(line: number, value: string | number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const ms = typeof value === "number" ? Math.round(value < 1e11 ? value * 1000 : value) : Date.parse(value);
  if (!Number.isSafeInteger(ms) || ms < 0) {
    throw new ThreadFileError(
      line,
      `timestamp ${JSON.stringify(value)} is not a time (ISO 8601 or seconds since 1970)`,
    );
  }
  return ms;
}

/**
 * The records of a legacy log as a parley.thread import into `contextId`:
 * every message gets provenance IMPORTED, a messageId derived from its line
 * number and bytes (so importing the same log again adds nothing), the log's
 * timestamp (or `now` when it has none), and the original object in its
 * metadata. Blank lines are skipped; any other line that is not such an
 * object refuses the whole file with its line number.
 */
export function legacyRecords(text: string, contextId: string, now: number): ThreadRecord[] {
  const messages: ThreadRecord[] = [];
  for (const { line, text: raw } of numberedLines(text)) {
    if (raw.trim() === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      throw new ThreadFileError(line, `not JSON (${(error as Error).message})`);
    }
    const parsed = legacyLine.safeParse(value);
    if (!parsed.success) {
      throw new ThreadFileError(
        line,
        parsed.error.issues.map((i) => `${i.path.join(".") || "line"}: ${i.message}`).join("; "),
      );
    }
    const { role, content, timestamp } = parsed.data;
    const messageId = `legacy-${createHash("sha256").update(`${line}\n${raw}`).digest("hex").slice(0, 32)}`;
    messages.push(
      create(ThreadRecordSchema, {
        record: {
          case: "message",
          value: {
            sequence: BigInt(messages.length + 1),
            messageId,
            provenance: Provenance.IMPORTED,
            createTime: timestampFromMs(timeOf(line, timestamp, now)),
            message: {
              messageId,
              contextId,
              role: roles[role],
              parts: [{ content: { case: "text", value: content } }],
              metadata: {
                [importExtension]: { format: "legacy-jsonl", line, original: value as Record<string, never> },
              },
            },
          },
        },
      }),
    );
  }
  if (messages.length === 0) throw new ThreadFileError(1, "the log holds no messages");
  return [
    create(ThreadRecordSchema, {
      record: {
        case: "header",
        value: {
          format: threadFormat.name,
          version: threadFormat.version,
          source: { software: "legacy-jsonl", messageSchema: "lf.a2a.v1.Message" },
          contextId,
          exportTime: timestampFromMs(now),
        },
      },
    }),
    ...messages,
    create(ThreadRecordSchema, {
      record: { case: "end", value: { messageCount: BigInt(messages.length), taskCount: 0n } },
    }),
  ];
}
