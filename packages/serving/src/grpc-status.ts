import type { ConnectError } from "@connectrpc/connect";
import { headerGrpcMessage, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";

// Printable ASCII but "%": the bytes the gRPC HTTP/2 protocol sends as they are in grpc-message.
const plainMessage = /^[\x20-\x24\x26-\x7e]*$/;
const utf8 = new TextEncoder();

/**
 * `text` percent-encoded as gRPC's HTTP/2 protocol defines grpc-message: every byte of its UTF-8 outside
 * 0x20-0x7E, and "%", as %XX; everything else as it is. connect-es encodes with encodeURIComponent, which also
 * escapes ":" or "," and so on; grpc-js decodes with decodeURI, which leaves those escaped (`busy%3A task`).
 */
export function percentEncodeGrpcMessage(text: string): string {
  if (plainMessage.test(text)) return text;
  let out = "";
  for (const byte of utf8.encode(text)) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** connect-es's setTrailerStatus (status, message, details), with grpc-message encoded as the gRPC protocol says. */
export function setGrpcStatus(trailer: Headers, error: ConnectError | undefined): Headers {
  setTrailerStatus(trailer, error);
  if (error) trailer.set(headerGrpcMessage, percentEncodeGrpcMessage(error.rawMessage));
  return trailer;
}
