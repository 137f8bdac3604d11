import { request as httpRequest, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import type { PinnedDestination } from "./push-destination.js";

/**
 * One POST to a checked destination, connected to its pinned address: the
 * `lookup` hook answers every resolution of the host with that address, so the
 * connection cannot go anywhere the check did not see (TLS still verifies the
 * certificate against the host name). node:http follows no redirects; the
 * caller treats a 3xx as a refusal. A fresh connection per POST (no agent
 * pool), so a socket opened for one check is never reused after another.
 */
export function postPinned(
  destination: PinnedDestination,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
): Promise<number> {
  const { url, address, family } = destination;
  const pinned: LookupFunction = (_host, options, callback) => {
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const payload = Buffer.from(body);
  const options: RequestOptions = {
    method: "POST",
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`,
    headers: { ...headers, "Content-Length": String(payload.byteLength) },
    lookup: pinned,
    agent: false,
    signal,
  };
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise<number>((resolve, reject) => {
    const req = send(options, (res) => {
      // The body is not read: drain it so the socket closes.
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}
