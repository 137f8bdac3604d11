// Replaces the text between a start and an end marker line of a generated documentation file, so that a
// generator (the configuration tables, the benchmark table) owns its section and nothing else of the file.
import { readFileSync, writeFileSync } from "node:fs";

/**
 * Writes `body` between the line starting with `startPrefix` and the line `end` of `file` (a URL or path).
 * Throws naming the file and both markers when either is missing, so a moved or renamed section is never lost.
 */
export function replaceSection(file, startPrefix, end, body) {
  const text = readFileSync(file, "utf8");
  const from = text.indexOf(startPrefix);
  const to = text.indexOf(end, Math.max(from, 0));
  if (from < 0 || to < 0) {
    throw new Error(`${String(file)} needs a line starting with ${startPrefix} and, after it, the line ${end}`);
  }
  const lineEnd = text.indexOf("\n", from);
  writeFileSync(file, `${text.slice(0, lineEnd + 1)}${body.trimEnd()}\n${text.slice(to)}`);
}
