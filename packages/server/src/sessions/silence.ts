import { createHash } from "node:crypto";

/** Asks the speaker to end the ping-pong; always honoured, whatever the configured set says. */
export const replySkipToken = "REPLY_SKIP";
/** Asks the target not to post a result at the announce step; always honoured. */
export const announceSkipToken = "ANNOUNCE_SKIP";

/** The configured silence tokens plus the two the session prompts ask for. */
export function silenceTokenSet(configured: readonly string[]): ReadonlySet<string> {
  return new Set([...configured.map((t) => t.trim()).filter(Boolean), replySkipToken, announceSkipToken]);
}

// Models like to decorate a bare token (`NO_REPLY`, **REPLY_SKIP**, "ANNOUNCE_SKIP".);
// the decoration must not turn silence into a delivered message.
function bareToken(line: string): string {
  return line
    .trim()
    .replace(/\.$/, "")
    .replace(/^[`*"'_]+|[`*"'_]+$/g, "")
    .trim();
}

/**
 * Whether a reply means "say nothing": the whole reply is a silence token, or
 * its last non-empty line is one. In the second form the lines above the
 * token are dropped as well: a model that ends with a silence token has
 * decided not to speak, and the preamble is usually reasoning about that
 * decision, not a message meant for the other side (OpenClaw #74071).
 */
export function isSilentReply(text: string, tokens: ReadonlySet<string>): boolean {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const last = lines[lines.length - 1];
  return last !== undefined && tokens.has(bareToken(last));
}

/**
 * Whether a request is a silence token as a whole (one line, decorated or
 * not): there is nothing in it to deliver.
 */
export function isSilentRequest(text: string, tokens: ReadonlySet<string>): boolean {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  return lines.length === 1 && tokens.has(bareToken(lines[0]!));
}

/**
 * Where a streamed reply must stop being passed on for now: at the start of
 * its last non-empty line when that line could still turn out to be a
 * silence token (`NO_`, `**NO_REPLY`), else at its end. Text before that
 * point can no longer make the reply silent by itself.
 */
export function silenceHoldFrom(text: string, tokens: ReadonlySet<string>): number {
  for (let end = text.length; end > 0; ) {
    const start = text.lastIndexOf("\n", end - 1) + 1;
    const line = text.slice(start, end);
    if (line.trim() !== "") {
      const core = line
        .trim()
        .replace(/^[`*"'_]+/, "")
        .replace(/[`*"'_.]+$/, "")
        .trim();
      for (const token of tokens) if (token.startsWith(core)) return start;
      return text.length;
    }
    end = start - 1;
  }
  return 0;
}

/** A reply with its whitespace folded, for spotting repeats. */
export function foldReply(text: string): string {
  return text.trim().replace(/\s+/g, " ");
}

/** Digest of a folded reply: what step messages carry to recognise a repeat without repeating the text. */
export function replyDigest(text: string): string {
  return createHash("sha256").update(foldReply(text)).digest("hex").slice(0, 32);
}
