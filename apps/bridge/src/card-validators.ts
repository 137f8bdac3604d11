import { createHash } from "node:crypto";

/** How many card representations remember when they first appeared (one per agent and version, normally). */
const REMEMBERED_CARDS = 256;

export interface CardValidators {
  readonly etag: string;
  /** When this representation was first served, as an HTTP date. */
  readonly lastModified: string;
}

/**
 * Validators of the agent card's representations (RFC 9110 section 8.8): a
 * strong ETag from the body's digest, and Last-Modified, the time this exact
 * body was first served by this process. A card changes only when its config
 * does, so that time stays put while the card does, and moves when it changes.
 */
export function createCardValidators(now: () => number = Date.now) {
  const firstSeen = new Map<string, number>();
  return {
    of(body: string): CardValidators {
      const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;
      let seen = firstSeen.get(etag);
      if (seen === undefined) {
        // HTTP dates have whole seconds; rounding down keeps If-Modified-Since comparisons exact.
        seen = Math.floor(now() / 1000) * 1000;
        firstSeen.set(etag, seen);
        if (firstSeen.size > REMEMBERED_CARDS) firstSeen.delete(firstSeen.keys().next().value!);
      }
      return { etag, lastModified: new Date(seen).toUTCString() };
    },
  };
}

/**
 * Whether a GET/HEAD may be answered 304. If-None-Match decides when present
 * (weak comparison, `*` matches); only without it is If-Modified-Since read,
 * and an unparsable date is ignored, as RFC 9110 section 13.1.3 asks.
 */
export function notModified(
  validators: CardValidators,
  ifNoneMatch: string | undefined,
  ifModifiedSince: string | undefined,
): boolean {
  if (ifNoneMatch !== undefined && ifNoneMatch.trim() !== "") {
    return ifNoneMatch
      .split(",")
      .map((t) => t.trim().replace(/^W\//, ""))
      .some((t) => t === validators.etag || t === "*");
  }
  if (ifModifiedSince === undefined) return false;
  const since = Date.parse(ifModifiedSince);
  return Number.isFinite(since) && Date.parse(validators.lastModified) <= since;
}
