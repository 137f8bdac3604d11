import type { ServerHttp2Session } from "node:http2";
import type { ConnectionLimits } from "./connection-limits.js";

/**
 * The timeouts Node's HTTP/2 server does not have:
 *
 * - a new session whose client has not sent its SETTINGS frame (the rest of
 *   its connection preface) within `headersTimeoutMs` is destroyed;
 * - a session with no open stream for `http2IdleTimeoutMs`, from its start or
 *   from the end of its last stream, is closed with GOAWAY (clients open a new
 *   connection for their next call), and destroyed if it has not closed
 *   `headersTimeoutMs` later. This also bounds a client that never finishes
 *   the headers of its first stream.
 *
 * Streams per session are bounded by SETTINGS_MAX_CONCURRENT_STREAMS, which the
 * server advertises itself.
 */
export function watchHttp2Session(session: ServerHttp2Session, limits: ConnectionLimits): void {
  let open = 0;
  let idle: NodeJS.Timeout | undefined;
  const settings = setTimeout(() => session.destroy(), limits.headersTimeoutMs).unref();
  session.once("remoteSettings", () => clearTimeout(settings));

  const closeIdle = () => {
    idle = undefined;
    if (session.closed || session.destroyed) return;
    session.close();
    setTimeout(() => {
      if (!session.destroyed) session.destroy();
    }, limits.headersTimeoutMs).unref();
  };
  const armIdle = () => {
    idle = setTimeout(closeIdle, limits.http2IdleTimeoutMs).unref();
  };
  session.on("stream", (stream) => {
    open++;
    if (idle) {
      clearTimeout(idle);
      idle = undefined;
    }
    stream.once("close", () => {
      open--;
      if (open === 0 && !session.closed && !session.destroyed) armIdle();
    });
  });
  session.once("close", () => {
    clearTimeout(settings);
    if (idle) clearTimeout(idle);
  });
  armIdle();
}
