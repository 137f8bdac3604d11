import { create, fromJson } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import { PartSchema, Provenance, Role, TaskState, ThreadMessageSchema } from "@parley/proto";
import { describe, expect, it } from "vitest";
import {
  formatTime,
  partsText,
  provenanceLabel,
  roleLabel,
  shortId,
  stopReasonLabel,
  taskStateLabel,
  taskStateTone,
} from "../src/logic/format.js";

describe("format", () => {
  it("writes times in UTC with a fixed width, and a dash for none", () => {
    expect(formatTime(timestampFromMs(Date.UTC(2026, 11, 1, 9, 5, 7, 999)))).toBe("2026-12-01 09:05:07");
    expect(formatTime(timestampFromMs(Date.UTC(2026, 0, 31, 23, 59, 0)))).toHaveLength(19);
    expect(formatTime(undefined)).toBe("—");
  });

  it("names task states in words and gives each a tone", () => {
    expect(taskStateLabel(TaskState.INPUT_REQUIRED)).toBe("input required");
    expect(taskStateLabel(TaskState.WORKING)).toBe("working");
    expect(taskStateTone(TaskState.WORKING)).toBe("running");
    expect(taskStateTone(TaskState.COMPLETED)).toBe("ok");
    expect(taskStateTone(TaskState.CANCELED)).toBe("bad");
    expect(taskStateTone(TaskState.AUTH_REQUIRED)).toBe("waiting");
    expect(stopReasonLabel(8)).toBe("agent failed");
    expect(stopReasonLabel(0)).toBe("");
  });

  it("labels provenance, and a session's announce step as announce", () => {
    const stored = (provenance: Provenance, metadata?: object) =>
      create(ThreadMessageSchema, {
        provenance,
        message: { role: Role.USER, parts: [], ...(metadata ? { metadata: metadata as never } : {}) },
      });
    expect(provenanceLabel(stored(Provenance.USER))).toBe("user");
    expect(provenanceLabel(stored(Provenance.AGENT))).toBe("agent");
    expect(provenanceLabel(stored(Provenance.IMPORTED))).toBe("imported");
    expect(provenanceLabel(stored(Provenance.INTER_SESSION))).toBe("inter-session");
    expect(provenanceLabel(stored(Provenance.INTER_SESSION, { parley: { session: { phase: "announce" } } }))).toBe(
      "announce",
    );
    expect(provenanceLabel(stored(Provenance.INTER_SESSION, { parley: { session: { phase: "ping-pong" } } }))).toBe(
      "inter-session",
    );
    expect(provenanceLabel(stored(Provenance.UNSPECIFIED))).toBe("unrecorded");
    expect(roleLabel(Role.AGENT)).toBe("agent");
  });

  it("renders parts as text, data as JSON and files by name", () => {
    const parts = [
      create(PartSchema, { content: { case: "text", value: "hi " } }),
      create(PartSchema, { content: { case: "data", value: fromJson(ValueSchema, { a: 1 }) } }),
      create(PartSchema, { content: { case: "raw", value: new Uint8Array(3) }, filename: "x.bin" }),
    ];
    expect(partsText(parts)).toBe('hi {"a":1}[file x.bin, 3 bytes]');
  });

  it("shortens long ids only", () => {
    expect(shortId("ctx-1234")).toBe("ctx-1234");
    expect(shortId("0123456789abcdefghij")).toBe("0123456789ab…");
  });
});
