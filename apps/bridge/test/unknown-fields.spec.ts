import { SendMessageRequestSchema } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { withoutUnknownFields } from "../src/unknown-fields.js";

const request = () => ({
  message: {
    messageId: "m",
    role: "ROLE_USER",
    parts: [{ text: "hi", metadata: { anything: { goes: 1 } } }],
    metadata: { free: "form" },
  },
  configuration: { historyLength: 2 },
});

describe("dropping unknown fields", () => {
  it("hands back a request without unknown fields as it is, not a copy", () => {
    const json = request();
    expect(withoutUnknownFields(SendMessageRequestSchema, json)).toBe(json);
  });

  it("drops unknown keys at any depth, and keeps Struct keys, which are data", () => {
    const json = request() as Record<string, unknown> & ReturnType<typeof request>;
    (json.message.parts[0] as Record<string, unknown>).colour = "red";
    json.future = { x: 1 };
    const out = withoutUnknownFields(SendMessageRequestSchema, json);
    expect(out).not.toBe(json);
    expect(out).toEqual(request());
  });

  it("keeps one spelling of a field given under both of its names", () => {
    const json = { ...request(), message: { ...request().message, message_id: "other" } };
    expect(withoutUnknownFields(SendMessageRequestSchema, json)).toEqual(request());
  });
});
