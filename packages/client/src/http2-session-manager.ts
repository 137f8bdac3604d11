// An HTTP/2 session manager whose sessions can never end the process with an unhandled 'error' event.
import type * as http2 from "node:http2";
import { Http2SessionManager } from "@connectrpc/connect-node";

/** Listens so that a late session 'error' has a listener; the error itself reaches the call through its stream. */
function ignoreSessionError() {}

/**
 * connect-node's Http2SessionManager with one safeguard. Node emits a failed
 * session's 'error' event only when its socket closes, after the stream that
 * met the failure has already failed its call. A caller that then closes the
 * client (as the CLI does when a call fails) makes the manager drop its own
 * 'error' listener first, so the event had none and Node threw it: a server
 * that answers the HTTP/2 preface in HTTP/1.1 (the bridge's port) crashed the
 * CLI after its error line. Every session a request went out on keeps one
 * listener for its whole life; the call's error and the manager's state are
 * what they were.
 */
export class SafeHttp2SessionManager extends Http2SessionManager {
  override async request(
    method: string,
    path: string,
    headers: http2.OutgoingHttpHeaders,
    options: Omit<http2.ClientSessionRequestOptions, "signal">,
  ): Promise<http2.ClientHttp2Stream> {
    const stream = await super.request(method, path, headers, options);
    const session = stream.session;
    if (session && !session.listeners("error").includes(ignoreSessionError)) session.on("error", ignoreSessionError);
    return stream;
  }
}
