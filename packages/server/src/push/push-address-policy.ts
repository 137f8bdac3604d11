import { createRequire } from "node:module";
import type * as IpAddr from "ipaddr.js";

// ipaddr.js is CommonJS with `export =`; Node gives ESM only its default export, which this repo's
// compiler settings (no esModuleInterop) do not let a default import name.
const ipaddr = createRequire(import.meta.url)("ipaddr.js") as typeof IpAddr;

/**
 * Which IP addresses push notifications may reach. A webhook URL is chosen by
 * any tenant, so without this a tenant could make the server POST task JSON
 * (with the config's token) to services only the server can reach: loopback,
 * the cloud metadata endpoint, the private network. Only globally routable
 * unicast addresses are reachable by default; everything else (ipaddr.js's
 * ranges: loopback, private, uniqueLocal, linkLocal, carrierGradeNat,
 * unspecified, multicast, broadcast, reserved, benchmarking, the IPv6
 * transition ranges that embed an IPv4 address, ...) needs an explicit entry in
 * push.allowedAddresses. ipaddr.js parses every IPv4 spelling a resolver or a
 * URL parser accepts (127.1, 0x7f.1, 2130706433, 0177.0.0.1) and unwraps
 * IPv4-mapped IPv6 (::ffff:127.0.0.1), so no spelling slips past the check.
 */

type Address = IpAddr.IPv4 | IpAddr.IPv6;

/** Cloud instance metadata endpoints: they hand out credentials, so a wide CIDR never unlocks them. */
const metadataAddresses = [
  "169.254.169.254", // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
  "169.254.170.2", // AWS ECS task metadata
  "169.254.169.123", // AWS time sync
  "fd00:ec2::254", // AWS over IPv6
  "fd00:ec2::23",
  "100.100.100.200", // Alibaba Cloud
  "192.0.0.192", // Oracle Cloud
].map((text) => ipaddr.parse(text));

/** One entry of push.allowedAddresses: an address, or a CIDR range. */
interface AllowedRange {
  readonly text: string;
  readonly base: Address;
  readonly bits: number;
}

export interface PushAddressPolicy {
  /** Why `address` may not be reached, or undefined when it may. */
  refusal(address: string): string | undefined;
}

/** Why an entry of push.allowedAddresses is not usable, or undefined when it is. */
export function allowedAddressProblem(entry: string): string | undefined {
  const [address, bits, extra] = entry.split("/");
  if (extra !== undefined || address === undefined || address === "") return "expected an IP address or CIDR";
  // Only the canonical spellings in configuration: "010.0.0.1" would silently mean 8.0.0.1.
  const canonical = ipaddr.IPv4.isValidFourPartDecimal(address) || ipaddr.IPv6.isValid(address);
  if (!canonical) return "expected an IP address (four-part decimal IPv4 or IPv6) or CIDR";
  if (bits !== undefined && !ipaddr.isValidCIDR(entry)) return "the prefix length after / is out of range";
  return undefined;
}

function parseAllowed(entry: string): AllowedRange {
  const problem = allowedAddressProblem(entry);
  if (problem) throw new Error(`push.allowedAddresses entry ${JSON.stringify(entry)}: ${problem}`);
  if (entry.includes("/")) {
    const [parsed, bits] = ipaddr.parseCIDR(entry);
    const base = unwrap(parsed);
    // ::ffff:10.0.0.0/104 is 10.0.0.0/8: mapped addresses are checked as IPv4.
    return { text: entry, base, bits: base === parsed ? bits : Math.max(0, bits - 96) };
  }
  const base = ipaddr.process(entry);
  return { text: entry, base, bits: base.kind() === "ipv4" ? 32 : 128 };
}

/** IPv4-mapped IPv6 (::ffff:a.b.c.d) is the IPv4 address: checked as one. */
function unwrap(address: Address): Address {
  return address.kind() === "ipv6" && (address as IpAddr.IPv6).isIPv4MappedAddress()
    ? (address as IpAddr.IPv6).toIPv4Address()
    : address;
}

function same(a: Address, b: Address): boolean {
  return a.kind() === b.kind() && a.toNormalizedString() === b.toNormalizedString();
}

/** Parses an address in any spelling a URL host or resolver answer may have; undefined if it is not one. */
export function parseAddress(text: string): Address | undefined {
  const bare = text.replace(/^\[(.*)\]$/, "$1");
  if (!ipaddr.isValid(bare)) return undefined;
  return unwrap(ipaddr.parse(bare));
}

export function createPushAddressPolicy(allowedAddresses: readonly string[]): PushAddressPolicy {
  const allowed = allowedAddresses.map(parseAllowed);
  const permitted = allowed.map((entry) => entry.text).join(", ") || "none";
  const isMetadata = (address: Address) => metadataAddresses.some((m) => same(m, address));
  const isListed = (address: Address) =>
    allowed.some((entry) =>
      // A metadata endpoint must be listed by its exact address, so allowing 169.254.0.0/16 for a
      // link-local service does not also hand the instance's credentials to every tenant.
      isMetadata(address)
        ? entry.bits === (address.kind() === "ipv4" ? 32 : 128) && same(entry.base, address)
        : entry.base.kind() === address.kind() && address.match(entry.base as never, entry.bits),
    );
  return {
    refusal(text) {
      const address = parseAddress(text);
      if (!address) return `${JSON.stringify(text)} is not an IP address`;
      if (isListed(address)) return undefined;
      const metadata = isMetadata(address);
      const range = address.range();
      if (range === "unicast" && !metadata) return undefined;
      const what = metadata ? "a cloud metadata endpoint" : `${range} (not a public address)`;
      const how = metadata ? "lists this exact address" : "lists it or a CIDR that holds it";
      return `${address.toString()} is ${what}; push notifications go there only if push.allowedAddresses (PARLEY_PUSH_ALLOWED_ADDRESSES) ${how}; it lists: ${permitted}`;
    },
  };
}
