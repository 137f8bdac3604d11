import type { IncomingMessage } from "node:http";
import { a2aErrorDomain, a2aMajorMinor, headers } from "@parley/proto";
import { errorInfoData, JsonRpcCode, JsonRpcError } from "./json-rpc-error.js";
import { type ProtocolVersion, supportedVersions } from "./methods.js";
import { headerValue } from "./request-headers.js";

/**
 * The A2A version of a request that names none: 0.3, as the specification
 * says (the A2A-Version header arrived with 1.0, so its absence means an
 * older client).
 */
export const defaultVersion = "0.3";

/** The query parameter that names the version in the URL a client was configured with. */
const versionParameter = "A2A-Version";

export interface RequestedVersion {
  /** What the request asked for, or `defaultVersion`; not checked against the supported versions. */
  readonly version: string;
  /** True when the request named a version; false when `version` is the default. */
  readonly explicit: boolean;
}

/**
 * The A2A version a request asks for. The query parameter wins over the
 * header because it is the explicit choice written into the URL a client was
 * configured with.
 */
export function negotiateVersion(req: IncomingMessage, url: URL): RequestedVersion {
  const named = url.searchParams.get(versionParameter)?.trim() || headerValue(req, headers.a2aVersion)?.trim();
  return named ? { version: named, explicit: true } : { version: defaultVersion, explicit: false };
}

/** The version as one the bridge speaks, or the VERSION_NOT_SUPPORTED error that lists those it does. */
export function checkVersion(version: string): ProtocolVersion {
  // Major.Minor only: a patch number is not negotiated (section 3.6), so "1.0.1" is 1.0.
  const majorMinor = a2aMajorMinor(version);
  if ((supportedVersions as readonly string[]).includes(majorMinor)) return majorMinor as ProtocolVersion;
  throw new JsonRpcError(
    JsonRpcCode.VersionNotSupported,
    `A2A protocol version ${JSON.stringify(version)} is not supported; supported versions: ${supportedVersions.join(", ")}`,
    {
      data: errorInfoData("VERSION_NOT_SUPPORTED", a2aErrorDomain, {
        requested: version,
        supported: supportedVersions.join(","),
      }),
    },
  );
}
