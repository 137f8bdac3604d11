import { a2aErrorDomain } from "@parley/proto";
import { errorInfoData, JsonRpcCode, JsonRpcError } from "./json-rpc-error.js";

/**
 * The error for a JSON-RPC request's Content-Type, checked before anything
 * else about the request: only `application/json` is accepted, with any
 * parameters (`; charset=utf-8`). The A2A JSON-RPC binding answers anything
 * else, a missing header included, with ContentTypeNotSupportedError (-32005),
 * which names what was received. Undefined when the type is right.
 */
export function contentTypeError(contentType: string | undefined): JsonRpcError | undefined {
  const mediaType = contentType?.split(";", 1)[0]?.trim().toLowerCase() ?? "";
  if (mediaType === "application/json") return undefined;
  const received =
    contentType === undefined || contentType.trim() === ""
      ? "no Content-Type"
      : JSON.stringify(contentType.slice(0, 200));
  return new JsonRpcError(
    JsonRpcCode.ContentTypeNotSupported,
    `content type not supported: the request has ${received}; JSON-RPC requests must be sent as application/json`,
    { data: errorInfoData("CONTENT_TYPE_NOT_SUPPORTED", a2aErrorDomain, { received: contentType ?? "" }) },
  );
}
