import { connect } from "node:net";

/** One HTTP/1.1 exchange written byte by byte, so malformed requests reach the bridge exactly as generated. */
export interface RawRequest {
  readonly method: string;
  readonly path: string;
  /** Sent as given; Host and Connection: close are added. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: Buffer;
  /**
   * whole: Content-Length and the body in one write. slow: the body dribbled in
   * pieces. truncated: a Content-Length larger than the body, then the client
   * closes its side. chunked: Transfer-Encoding chunked, no length up front.
   * garbage: `body` is the entire request, not even a request line.
   */
  readonly mode: "whole" | "slow" | "truncated" | "chunked" | "garbage";
  /** For "slow": where to cut the body. */
  readonly cuts?: readonly number[];
  /** For "truncated": how many bytes more than sent the header declares. */
  readonly missing?: number;
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** What came back: a parsed response, or nothing before the connection closed (with the socket error, if any). */
export type RawOutcome = { readonly response: RawResponse } | { readonly closed: string };

function head(req: RawRequest, framing: string): string {
  const lines = [`${req.method} ${req.path} HTTP/1.1`, "Host: 127.0.0.1", "Connection: close"];
  for (const [k, v] of req.headers) lines.push(`${k}: ${v}`);
  lines.push(framing);
  return `${lines.join("\r\n")}\r\n\r\n`;
}

function dechunk(body: Buffer): Buffer | undefined {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf("\r\n", at);
    if (eol < 0) return undefined;
    const size = Number.parseInt(body.subarray(at, eol).toString("latin1"), 16);
    if (!Number.isFinite(size)) return undefined;
    if (size === 0) return Buffer.concat(out);
    out.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** Parses what the server wrote before closing; undefined when no complete response head arrived. */
export function parseResponse(bytes: Buffer, method: string): RawResponse | undefined {
  const end = bytes.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const [statusLine, ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1]);
  if (!Number.isInteger(status)) return undefined;
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = bytes.subarray(end + 4);
  if (method === "HEAD" || status === 304) body = Buffer.alloc(0);
  else if (headers["transfer-encoding"] === "chunked") body = dechunk(body) ?? body;
  else if (headers["content-length"] !== undefined) body = body.subarray(0, Number(headers["content-length"]));
  return { status, headers, body };
}

function isComplete(bytes: Buffer, method: string): boolean {
  const end = bytes.indexOf("\r\n\r\n");
  if (end < 0) return false;
  const headText = bytes.subarray(0, end).toString("latin1").toLowerCase();
  if (method === "HEAD" || / 304 /.test(headText.split("\r\n")[0] ?? "")) return true;
  if (/\r\ntransfer-encoding: *chunked/.test(headText))
    return bytes.subarray(end + 4).includes("\r\n0\r\n\r\n") || bytes.subarray(end + 4).indexOf("0\r\n\r\n") === 0;
  const length = /\r\ncontent-length: *(\d+)/.exec(headText)?.[1];
  return length !== undefined && bytes.length - end - 4 >= Number(length);
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sends one request on its own connection and reads until the server closes it. */
export function rawExchange(port: number, req: RawRequest): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    const received: Buffer[] = [];
    let socketError = "";
    socket.on("data", (chunk: Buffer) => {
      received.push(chunk);
      // SSE answers say "Connection: keep-alive" whatever the request asked, so a complete response ends the wait.
      if (isComplete(Buffer.concat(received), req.method)) socket.destroy();
    });
    // A server that answers early (413) and drops the connection resets our writes: that is not a failure.
    socket.on("error", (error) => {
      socketError = (error as NodeJS.ErrnoException).code ?? error.message;
    });
    socket.on("close", () => {
      const bytes = Buffer.concat(received);
      const response = parseResponse(bytes, req.method);
      resolve(response ? { response } : { closed: socketError || `closed after ${bytes.length} bytes` });
    });
    const write = (data: Buffer | string) =>
      new Promise<void>((done) => {
        if (socket.destroyed || !socket.writable) return done();
        socket.write(data, () => done());
      });
    socket.on("connect", async () => {
      switch (req.mode) {
        case "garbage":
          await write(req.body);
          socket.end();
          return;
        case "whole":
          await write(head(req, `Content-Length: ${req.body.length}`));
          await write(req.body);
          return;
        case "truncated":
          await write(head(req, `Content-Length: ${req.body.length + (req.missing ?? 1)}`));
          await write(req.body);
          socket.end();
          return;
        case "chunked": {
          await write(head(req, "Transfer-Encoding: chunked"));
          const size = 64 * 1024;
          for (let at = 0; at < req.body.length && socket.writable; at += size) {
            const piece = req.body.subarray(at, at + size);
            await write(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")]));
          }
          await write("0\r\n\r\n");
          return;
        }
        case "slow": {
          await write(head(req, `Content-Length: ${req.body.length}`));
          const cuts = [0, ...(req.cuts ?? []), req.body.length];
          for (let i = 0; i + 1 < cuts.length; i++) {
            await write(req.body.subarray(cuts[i], cuts[i + 1]));
            await pause(5);
          }
          return;
        }
      }
    });
  });
}
