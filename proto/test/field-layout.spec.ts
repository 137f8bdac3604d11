import { describe, expect, it } from "vitest";
import { checkFieldLayouts, TaskStatusSchema } from "../src/index.js";

describe("checkFieldLayouts", () => {
  it("accepts the layouts the schemas have, by either name", () => {
    expect(() =>
      checkFieldLayouts("w", "localName", [[TaskStatusSchema, "state:1 message:2 timestamp:3"]]),
    ).not.toThrow();
    expect(() =>
      checkFieldLayouts("w", "jsonName", [[TaskStatusSchema, "state:1 message:2 timestamp:3"]]),
    ).not.toThrow();
  });

  it("names the writer, the message and both layouts when a schema differs", () => {
    expect(() => checkFieldLayouts("my-writer", "jsonName", [[TaskStatusSchema, "state:1 timestamp:3"]])).toThrow(
      'my-writer writes lf.a2a.v1.TaskStatus as "state:1 timestamp:3", but its schema is "state:1 message:2 timestamp:3"',
    );
  });
});
