// The check behind every hand-written encoder of these messages (the server's binary, the bridge's JSON): the
// fields it writes, as the generated schemas number and name them. Hand-written, like wire.ts.
import type { DescMessage } from "@bufbuild/protobuf";

/** A message's fields as an encoder writes them: "name:number" each, in the schema's order, space separated. */
export type FieldLayout = readonly [DescMessage, string];

/**
 * Throws, naming the first message whose fields differ, when a schema no longer has the layout `writer` was
 * written for: a proto that adds, renames or renumbers a field stops the program at its start (and every test)
 * instead of letting the encoder write something else. `names` is the name the encoder writes by (localName for
 * binary, jsonName for ProtoJSON).
 */
export function checkFieldLayouts(
  writer: string,
  names: "localName" | "jsonName",
  layouts: readonly FieldLayout[],
): void {
  for (const [schema, expected] of layouts) {
    const actual = schema.fields.map((f) => `${f[names]}:${f.number}`).join(" ");
    if (actual !== expected) {
      throw new Error(`${writer} writes ${schema.typeName} as "${expected}", but its schema is "${actual}"`);
    }
  }
}
