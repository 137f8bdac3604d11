import type { IncomingHttpHeaders } from "node:http";
import { cors as connectCors } from "@connectrpc/connect";
import { parleyRequestHeaders, headers as wireHeaders } from "@parley/proto";

/** What the CORS check did with a request. */
export type CorsVerdict =
  /** Not a cross-origin request (no Origin header, or the server's own origin), or one from an allowed origin: go on. */
  | "pass"
  /** A preflight from an allowed origin, answered here. */
  | "answered"
  /** A request from an origin that is not on the allow-list, refused here with 403. */
  | "refused";

/** The part of Node's HTTP/1.1 and HTTP/2 compatibility responses the check writes to. */
interface MinimalResponse {
  setHeader(name: string, value: string | number | readonly string[]): unknown;
  writeHead(status: number, headers?: Record<string, string | number>): unknown;
  end(data: string): unknown;
  end(): unknown;
}

/** Request headers a browser client of Parley may send, beyond Connect's own. */
const browserRequestHeaders = [...parleyRequestHeaders, "traceparent", "tracestate", "last-event-id"];
/** Response headers a browser client may read, beyond Connect's own. */
const parleyResponseHeaders = [wireHeaders.requestId, wireHeaders.streamStart];

export interface Cors {
  readonly origins: ReadonlySet<string>;
  check(req: { readonly method?: string; readonly headers: IncomingHttpHeaders }, res: MinimalResponse): CorsVerdict;
}

/**
 * A page served by this very host (the bridge's console) calling it back: browsers send Origin on
 * same-origin POSTs too, and that is not a cross-origin request. The Host (or HTTP/2 :authority) the
 * browser addressed must equal the Origin's host; a page elsewhere cannot make a browser send both.
 */
function isSameOrigin(origin: string, headers: IncomingHttpHeaders): boolean {
  const host = headers.host ?? headers[":authority"];
  if (typeof host !== "string" || host === "") return false;
  try {
    return new URL(origin).host === host.toLowerCase();
  } catch {
    return false;
  }
}

/** Checks an origin entry: scheme://host[:port], nothing after it ("*" is not accepted: name the origins). */
export function parseCorsOrigin(entry: string): string {
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    throw new Error(
      `CORS origin ${JSON.stringify(entry)} must be scheme://host[:port], e.g. https://console.example.com`,
    );
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.origin !== entry.replace(/\/$/, "")) {
    throw new Error(
      `CORS origin ${JSON.stringify(entry)} must be exactly scheme://host[:port] (no path, no wildcard), e.g. https://console.example.com`,
    );
  }
  return url.origin;
}

/**
 * CORS for browser clients (Connect-Web, gRPC-Web, JSON-RPC fetch). Only the
 * listed origins are allowed; with none, every request that carries an Origin
 * header is refused, so a page on another site cannot use a browser's network
 * position or cookies against Parley. Requests without Origin (servers, CLIs,
 * gRPC clients) are not affected. The header lists are connect-es's plus
 * Parley's own headers.
 */
export function createCors(origins: readonly string[]): Cors {
  const allowed = new Set(origins.map(parseCorsOrigin));
  const allowMethods = [...connectCors.allowedMethods].join(", ");
  const allowHeaders = [...new Set([...connectCors.allowedHeaders, ...browserRequestHeaders])].join(", ");
  const exposeHeaders = [...new Set([...connectCors.exposedHeaders, ...parleyResponseHeaders])].join(", ");
  return {
    origins: allowed,
    check(req, res) {
      const origin = req.headers.origin;
      if (origin === undefined || isSameOrigin(origin, req.headers)) return "pass";
      const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
      if (!allowed.has(origin)) {
        const text = `origin ${origin} is not allowed to call this server (allowed: ${allowed.size === 0 ? "none" : [...allowed].join(", ")}); add it to the CORS origins`;
        res.writeHead(403, { "Content-Type": "text/plain; charset=utf-8", Vary: "Origin" });
        res.end(`${text}\n`);
        return "refused";
      }
      res.setHeader("Access-Control-Allow-Origin", origin);
      res.setHeader("Vary", "Origin");
      if (preflight) {
        res.writeHead(204, {
          "Access-Control-Allow-Methods": allowMethods,
          "Access-Control-Allow-Headers": allowHeaders,
          "Access-Control-Max-Age": 7200,
        });
        res.end();
        return "answered";
      }
      res.setHeader("Access-Control-Expose-Headers", exposeHeaders);
      return "pass";
    },
  };
}
