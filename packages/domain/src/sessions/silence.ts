import { createHash } from "node:crypto";

/** Asks the speaker to end the ping-pong; always honoured, whatever the configured set says. */
export const replySkipToken = "REPLY_SKIP";
/** Asks the target not to post a result at the announce step; always honoured. */
export const announceSkipToken = "ANNOUNCE_SKIP";

/**
 * The silence token grammar, the same for session steps and plain sends: a line is a token when, after
 * dropping the decoration around it (whitespace, punctuation, quotes, parentheses and brackets, markdown
 * emphasis and code marks), it equals a token case-insensitively, with runs of spaces, underscores and hyphens
 * counting as one separator. `NO_REPLY`, `No reply.`, `no-reply`, `(no reply)`, `**REPLY_SKIP**` and
 * `"no_reply"` are one token; `no reply here` is not.
 */
const decoration = /^[\s\p{P}\p{S}]+|[\s\p{P}\p{S}]+$/gu;

/** A line (or a token) in the grammar's canonical form: undecorated, lower case, separators folded to `_`. */
export function tokenKey(line: string): string {
  return line
    .replace(decoration, "")
    .toLowerCase()
    .replace(/[\s_-]+/g, "_");
}

/** The configured silence tokens plus the two the session prompts ask for, in canonical form (tokenKey). */
export function silenceTokenSet(configured: readonly string[]): ReadonlySet<string> {
  return new Set([...configured, replySkipToken, announceSkipToken].map(tokenKey).filter((key) => key !== ""));
}

/** The last non-empty line of a text and where it starts, or undefined when every line is blank. */
function lastLine(
  text: string,
  end: number = text.length,
): { readonly start: number; readonly line: string } | undefined {
  while (end > 0) {
    const start = Math.max(text.lastIndexOf("\n", end - 1) + 1, 0);
    const line = text.slice(start, end);
    if (line.trim() !== "") return { start, line };
    end = start - 1;
  }
  return undefined;
}

/** Whether one line is a silence token in the grammar above. */
export function isTokenLine(line: string, tokens: ReadonlySet<string>): boolean {
  return tokens.has(tokenKey(line));
}

/**
 * Where a reply's trailing token line starts (the reply is what comes before it), or -1 when its last non-empty
 * line is no token. A reply that is only a token answers 0 or the length of its leading blank lines.
 */
export function trailingTokenAt(text: string, tokens: ReadonlySet<string>): number {
  const last = lastLine(text);
  return last !== undefined && isTokenLine(last.line, tokens) ? last.start : -1;
}

/** Whether a reply is only a silence token (blank lines around it aside): there is nothing in it to deliver. */
export function isOnlyToken(text: string, tokens: ReadonlySet<string>): boolean {
  const at = trailingTokenAt(text, tokens);
  return at >= 0 && text.slice(0, at).trim() === "";
}

/**
 * Whether a session step's reply means "say nothing": its last non-empty line is a silence token. A step's reply
 * is withheld until it is complete, so nothing of it was shown: the lines above the token go too, being
 * usually reasoning about the decision not to speak, not a message meant for the other side (OpenClaw #74071).
 */
export function isSilentReply(text: string, tokens: ReadonlySet<string>): boolean {
  return trailingTokenAt(text, tokens) >= 0;
}

/** Whether a request is a silence token as a whole (one line, decorated or not): there is nothing in it to deliver. */
export function isSilentRequest(text: string, tokens: ReadonlySet<string>): boolean {
  return isOnlyToken(text, tokens);
}

/**
 * Where a streamed reply must stop being passed on for now: at the start of its last non-empty line while that
 * line could still be a silence token (still open, its canonical form a prefix of one: `NO_`, `**no re`, `(`;
 * or ended by a newline and a token), else at its end. Only that line (with blank lines around it) is ever held:
 * text before it can no longer turn into a trailing token line.
 */
export function silenceHoldFrom(text: string, tokens: ReadonlySet<string>): number {
  const last = lastLine(text);
  if (last === undefined) return 0;
  const key = tokenKey(last.line);
  const open = last.start + last.line.length === text.length;
  let hold = tokens.has(key);
  if (!hold && open) for (const token of tokens) if (token.startsWith(key)) hold = true;
  if (!hold) return text.length;
  // Blank lines above the line are held with it: a reply that is only a token must not have shown them.
  return text.slice(0, last.start).trim() === "" ? 0 : last.start;
}

/** A reply with its whitespace folded, for spotting repeats. */
export function foldReply(text: string): string {
  return text.trim().replace(/\s+/g, " ");
}

/** Digest of a folded reply: what step messages carry to recognise a repeat without repeating the text. */
export function replyDigest(text: string): string {
  return createHash("sha256").update(foldReply(text)).digest("hex").slice(0, 32);
}
