import { toJson } from "@bufbuild/protobuf";
import { type Timestamp, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type Message,
  type Part,
  Phase,
  Provenance,
  Role,
  Speaker,
  StopReason,
  TaskState,
  type ThreadMessage,
} from "@parley/proto";

/** The metadata key Parley writes its own message metadata under (see the server's engine). */
const parleyMetadataKey = "parley";

function pad(n: number, width = 2): string {
  return String(n).padStart(width, "0");
}

export function timestampMs(ts: Timestamp | undefined): number | undefined {
  if (!ts) return undefined;
  return Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1_000_000);
}

/**
 * A timestamp as "2026-12-01 10:31:02" in UTC, the zone of the server's logs,
 * so a line in the console and a line in a log can be matched by eye. The
 * width never changes, so columns of times stay aligned.
 */
export function formatTime(ts: Timestamp | undefined): string {
  const ms = timestampMs(ts);
  if (ms === undefined) return "—";
  const d = new Date(ms);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** Lower-case words of an enum value's name: TaskState.INPUT_REQUIRED -> "input required". */
function enumWords(table: Record<number, string>, value: number): string {
  return (table[value] ?? "unspecified").toLowerCase().replace(/_/g, " ");
}

export function taskStateLabel(state: TaskState): string {
  return enumWords(TaskState, state);
}

/** The colour family of a state badge. */
export type Tone = "running" | "ok" | "bad" | "waiting" | "idle";

export function taskStateTone(state: TaskState): Tone {
  switch (state) {
    case TaskState.SUBMITTED:
    case TaskState.WORKING:
      return "running";
    case TaskState.COMPLETED:
      return "ok";
    case TaskState.FAILED:
    case TaskState.REJECTED:
    case TaskState.CANCELED:
      return "bad";
    case TaskState.INPUT_REQUIRED:
    case TaskState.AUTH_REQUIRED:
      return "waiting";
    default:
      return "idle";
  }
}

export function roleLabel(role: Role): string {
  return role === Role.USER ? "user" : role === Role.AGENT ? "agent" : "unknown";
}

export function phaseLabel(phase: Phase): string {
  return enumWords(Phase, phase);
}

export function speakerLabel(speaker: Speaker): string {
  return speaker === Speaker.UNSPECIFIED ? "" : enumWords(Speaker, speaker);
}

export function stopReasonLabel(reason: StopReason): string {
  return reason === StopReason.UNSPECIFIED ? "" : enumWords(StopReason, reason);
}

/** The session-step phase Parley recorded in a message's metadata, if it is a step of a conversation. */
export function sessionPhaseOf(message: Pick<Message, "metadata"> | undefined): string | undefined {
  const parley = message?.metadata?.[parleyMetadataKey];
  if (!parley || typeof parley !== "object" || Array.isArray(parley)) return undefined;
  const session = (parley as Record<string, unknown>).session;
  if (!session || typeof session !== "object" || Array.isArray(session)) return undefined;
  const phase = (session as Record<string, unknown>).phase;
  return typeof phase === "string" ? phase : undefined;
}

/**
 * Where a stored message came from, in the words the console shows: user,
 * agent, inter-session (relayed by an agent-to-agent conversation), or
 * announce (the step in which the target decides what to post to its thread).
 */
export function provenanceLabel(entry: Pick<ThreadMessage, "provenance" | "message">): string {
  if (sessionPhaseOf(entry.message) === "announce") return "announce";
  switch (entry.provenance) {
    case Provenance.USER:
      return "user";
    case Provenance.AGENT:
      return "agent";
    case Provenance.INTER_SESSION:
      return "inter-session";
    case Provenance.IMPORTED:
      // Brought in from a legacy log by an operator: shown apart from what Parley recorded itself.
      return "imported";
    default:
      return "unrecorded";
  }
}

export function partText(part: Part): string {
  switch (part.content.case) {
    case "text":
      return part.content.value;
    case "data":
      return JSON.stringify(toJson(ValueSchema, part.content.value));
    case "url":
      return `[file ${part.filename || part.content.value}]`;
    case "raw":
      return `[file ${part.filename || "(unnamed)"}, ${part.content.value.byteLength} bytes]`;
    default:
      return "";
  }
}

export function partsText(parts: readonly Part[]): string {
  return parts.map(partText).join("");
}

/** "ctx-1a2b3c4d…" for long ids, so lists stay one line; the full id is in the title. */
export function shortId(id: string, keep = 12): string {
  return id.length <= keep + 1 ? id : `${id.slice(0, keep)}…`;
}
