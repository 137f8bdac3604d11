import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { type PushAddressPolicy, parseAddress } from "./push-address-policy.js";

/** What a push notification URL is checked against: the server's push settings. */
export interface PushDestinationRules {
  /** push.allowedHosts: when not empty, the only host names (or IPs) notifications may go to. */
  readonly allowedHosts: readonly string[];
  /** push.allowedAddresses, parsed: which non-public addresses may be reached. */
  readonly addresses: PushAddressPolicy;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; reason: string };

/** A destination that passed the checks, with the one address the POST must connect to. */
export interface PinnedDestination {
  readonly url: URL;
  readonly address: string;
  readonly family: 4 | 6;
}

/** The host of a URL as the allow-list spells it: lower case, IPv6 without brackets, no trailing dot. */
export function pushHostOf(url: URL): string {
  return url.hostname
    .replace(/^\[(.*)\]$/, "$1")
    .replace(/\.$/, "")
    .toLowerCase();
}

/** RFC 6761: these names are loopback whatever a resolver says. */
function isLocalhostName(host: string): boolean {
  return host === "localhost" || host.endsWith(".localhost");
}

/**
 * The checks that need no resolver, for the config set call and before every
 * POST: the URL's form, the host allow-list, and an IP literal's range (the
 * URL parser has already turned 127.1, 0x7f000001 and 2130706433 into
 * 127.0.0.1). A name is only checked against its addresses at delivery.
 */
export function checkPushUrl(url: string, rules: PushDestinationRules): Checked<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, reason: `push notification url ${JSON.stringify(url)} is not an absolute URL` };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return { ok: false, reason: `push notification url must be http or https, got ${JSON.stringify(parsed.protocol)}` };
  }
  if (parsed.username !== "" || parsed.password !== "") {
    return {
      ok: false,
      reason: "push notification url must not carry credentials; put them in authentication.credentials",
    };
  }
  const host = pushHostOf(parsed);
  const literal = parseAddress(host) !== undefined;
  const { allowedHosts, addresses } = rules;
  // The host allow-list keeps its meaning (exact names or IPs, when set); the address rules come on top.
  const hostAllowed = allowedHosts.length === 0 || allowedHosts.some((allowed) => allowed.toLowerCase() === host);
  if (!hostAllowed) {
    return {
      ok: false,
      reason: `push notification host ${JSON.stringify(host)} is not allowed; the server setting push.allowedHosts (PARLEY_PUSH_ALLOWED_HOSTS) permits: ${allowedHosts.join(", ")}`,
    };
  }
  const refusal = literal
    ? addresses.refusal(host)
    : isLocalhostName(host)
      ? (addresses.refusal("127.0.0.1") ?? addresses.refusal("::1"))
      : undefined;
  if (refusal) return { ok: false, reason: `push notification url ${JSON.stringify(url)} refused: ${refusal}` };
  return { ok: true, value: parsed };
}

/**
 * The full check, at delivery: checkPushUrl, then every address the host
 * resolves to must pass the address rules, and the POST is pinned to the
 * checked address (so a DNS answer that changes between the check and the
 * connect, DNS rebinding, cannot redirect it). A name with any refused address
 * is refused whole rather than picking the good one: such a name is either
 * misconfigured or hostile.
 */
export async function resolvePushDestination(
  url: string,
  rules: PushDestinationRules,
  resolve: (host: string) => Promise<{ address: string; family: number }[]> = (host) =>
    lookup(host, { all: true, verbatim: true }),
): Promise<Checked<PinnedDestination>> {
  const checked = checkPushUrl(url, rules);
  if (!checked.ok) return checked;
  const parsed = checked.value;
  const host = pushHostOf(parsed);
  const literal = parseAddress(host);
  if (literal) {
    const address = literal.toString();
    return { ok: true, value: { url: parsed, address, family: isIP(address) === 6 ? 6 : 4 } };
  }
  let answers: { address: string; family: number }[];
  try {
    answers = await resolve(host);
  } catch (error) {
    return {
      ok: false,
      reason: `push notification host ${JSON.stringify(host)} did not resolve: ${(error as Error).message}`,
    };
  }
  if (answers.length === 0)
    return { ok: false, reason: `push notification host ${JSON.stringify(host)} has no address` };
  for (const answer of answers) {
    const refusal = rules.addresses.refusal(answer.address);
    if (refusal) {
      return {
        ok: false,
        reason: `push notification host ${JSON.stringify(host)} resolves to ${answer.address}: ${refusal}`,
      };
    }
  }
  const first = answers[0]!;
  return { ok: true, value: { url: parsed, address: first.address, family: first.family === 6 ? 6 : 4 } };
}
