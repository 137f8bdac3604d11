// What the CLI says when the server's port does not speak the HTTP version a call used.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { ParleyProtocol } from "../client.js";

/** Where a client of the CLI goes, as the interceptor names it. */
export interface ConnectionTarget {
  readonly baseUrl: string;
  readonly protocol: ParleyProtocol;
}

/**
 * nghttp2's "Protocol error": what Node's HTTP/2 client reports when the other
 * side answered its h2c preface with something that is not HTTP/2, most often
 * an HTTP/1.1 server such as the bridge's JSON-RPC port.
 */
function isHttp2ProtocolError(error: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = error; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    if ((e as NodeJS.ErrnoException).code === "ERR_HTTP2_ERROR") return true;
  }
  return false;
}

function explained(error: unknown, target: ConnectionTarget): unknown {
  if (!isHttp2ProtocolError(error)) return error;
  const overHttp1 = target.protocol === "grpc" ? "--protocol connect --http-version 1.1" : "--http-version 1.1";
  return new ConnectError(
    `${target.baseUrl} does not speak HTTP/2 (h2c): is this the bridge's JSON-RPC port? ` +
      "The server's gRPC port is 8081 by default; the bridge's port answers Connect and gRPC-Web " +
      `over HTTP/1.1: add ${overHttp1}`,
    Code.Unavailable,
    undefined,
    undefined,
    error,
  );
}

/**
 * Turns the bare "Protocol error (Internal)" of an HTTP/2 call to a server
 * that does not speak HTTP/2 into an error naming the URL and what to do.
 * Calls over HTTP/1.1 never meet it and pass untouched.
 */
export function createConnectionErrorInterceptor(target: ConnectionTarget): Interceptor {
  return (next) => async (req) => {
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (error) {
      throw explained(error, target);
    }
    if (!res.stream) return res;
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* messages;
        } catch (error) {
          throw explained(error, target);
        }
      })(),
    };
  };
}
