import { JsonRpcCode, JsonRpcError } from "./json-rpc-error.js";

/**
 * The error for a JSON-RPC request's Content-Type, checked before anything
 * else about the request: only `application/json` is accepted, with any
 * parameters (`; charset=utf-8`). Anything else, a missing header included, is
 * not a JSON-RPC request: HTTP 415 with Invalid Request (-32600) naming what
 * was received (ContentTypeNotSupportedError, -32005, is about message parts).
 * Undefined when the type is right.
 */
export function contentTypeError(contentType: string | undefined): JsonRpcError | undefined {
  const mediaType = contentType?.split(";", 1)[0]?.trim().toLowerCase() ?? "";
  if (mediaType === "application/json") return undefined;
  const received =
    contentType === undefined || contentType.trim() === ""
      ? "no Content-Type"
      : JSON.stringify(contentType.slice(0, 200));
  return new JsonRpcError(
    JsonRpcCode.InvalidRequest,
    `invalid request: the request has ${received}; JSON-RPC requests must be sent as Content-Type: application/json`,
    { httpStatus: 415, headers: { Accept: "application/json" } },
  );
}
