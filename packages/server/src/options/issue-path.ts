import type { z } from "zod";

/** A key of a path into the configuration: an object key or a list index. */
export type PathKey = string | number;

/** The keys of a schema issue's path (zod allows symbols there; no setting has one). */
export function issueKeys(issue: z.core.$ZodIssue): PathKey[] {
  return issue.path.filter((k): k is PathKey => typeof k !== "symbol");
}

/** A path as the configuration's errors print it: `agents[0].options.peer`. */
export function displayPath(keys: readonly PathKey[]): string {
  return keys.reduce<string>((out, k) => (typeof k === "number" ? `${out}[${k}]` : out === "" ? k : `${out}.${k}`), "");
}
