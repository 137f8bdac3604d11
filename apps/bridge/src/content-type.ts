import { a2aErrorDomain } from "@parley/proto";
import { errorInfoData, JsonRpcCode, JsonRpcError } from "./json-rpc-error.js";

/**
 * Checks a JSON-RPC request's Content-Type before its body is read: only
 * `application/json` is accepted, with any parameters (`; charset=utf-8`).
 * The A2A JSON-RPC binding answers anything else, a missing header included,
 * with ContentTypeNotSupportedError (-32005), which names what was received.
 */
export function checkJsonContentType(contentType: string | undefined): void {
  const mediaType = contentType?.split(";", 1)[0]?.trim().toLowerCase() ?? "";
  if (mediaType === "application/json") return;
  const received =
    contentType === undefined || contentType.trim() === ""
      ? "no Content-Type"
      : JSON.stringify(contentType.slice(0, 200));
  throw new JsonRpcError(
    JsonRpcCode.ContentTypeNotSupported,
    `content type not supported: the request has ${received}; JSON-RPC requests must be sent as application/json`,
    { data: errorInfoData("CONTENT_TYPE_NOT_SUPPORTED", a2aErrorDomain, { received: contentType ?? "" }) },
  );
}
