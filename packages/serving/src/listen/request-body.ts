import type { NodeRequest, NodeResponse } from "./node-http.js";
import { stopRequestStream } from "./rpc-refusal.js";

/** A request body as the body reader read it. */
export interface ReadBody {
  /** What was kept: the whole body, or, when it was too large, its first `maxBodyBytes + 1` bytes. */
  readonly bytes: Buffer;
  /** The body was longer than `maxBodyBytes`; the handler must refuse it. */
  readonly tooLarge: boolean;
  /** Bytes that arrived, the discarded ones included. */
  readonly receivedBytes: number;
}

export interface BodyReaderOptions<Req extends NodeRequest = NodeRequest, Res extends NodeResponse = NodeResponse> {
  /** The longest body a handler takes. */
  readonly maxBodyBytes: number;
  /** Bytes past `maxBodyBytes` read and thrown away before a too-large body's handler runs. */
  readonly maxDiscardBytes: number;
  /** How long the whole body may take, from when the handler would have run. */
  readonly bodyTimeoutMs: number;
  /** Answers a request whose body did not arrive within `bodyTimeoutMs` (the message says so). */
  readonly refuseSlowBody: (req: Req, res: Res, message: string) => void;
  /**
   * Requests to hand over unread, at once: those of client- and bidi-streaming
   * RPCs (server reflection), whose handlers answer while the request goes on.
   */
  readonly passThrough?: (req: Req) => boolean;
}

/**
 * Where the body read for a request is kept: a property of the request, not a WeakMap entry (an ephemeron for
 * the garbage collector to trace, one per request).
 */
const bodyKey = Symbol("parley.readBody");
/** Set once the read body was iterated: the request stream is at its end after that, as a real one would be. */
const bodyTakenKey = Symbol("parley.bodyTaken");
type WithBody = { [bodyKey]?: ReadBody; [bodyTakenKey]?: boolean };

/** The body the reader read for this request, or undefined when it did not run in front of the handler. */
export function readBodyOf(req: object): ReadBody | undefined {
  return (req as WithBody)[bodyKey];
}

/**
 * A read request's body as an async iterable, for handlers that iterate the request (Connect's Node adapter reads
 * it through `req.iterator()`, and iterates again after answering to drain what is left): the first iteration
 * yields what was read, any later one nothing.
 */
async function* readBodyChunks(this: WithBody) {
  if (this[bodyTakenKey]) return;
  this[bodyTakenKey] = true;
  const bytes = this[bodyKey]?.bytes;
  if (bytes && bytes.length > 0) yield bytes;
}

/**
 * Reads every request's body before its handler runs, so that a port decides
 * how long and how large a body may be, whatever handler serves it:
 *
 * - A body that has not ended `bodyTimeoutMs` after its headers is refused
 *   (`refuseSlowBody`) and its connection (HTTP/1.1) or stream (HTTP/2) cut.
 * - A body longer than `maxBodyBytes` is read on and thrown away, up to
 *   `maxDiscardBytes` more, before the handler sees its first bytes (and
 *   refuses them: the message is too large). Only then does the refusal go
 *   out: a client still sending would otherwise meet a reset (HTTP/1.1) or,
 *   with Node's HTTP/2 client, hold the unsent rest in its session memory and
 *   refuse every response on that connection with ENHANCE_YOUR_CALM. Past
 *   `maxDiscardBytes` the refusal goes out at once and the request is cut after it.
 *
 * The handler gets the body through `readBodyOf(req)` or by iterating the
 * request (`for await`, as Connect's Node adapter does). This suits handlers
 * that take one message per request, as every Parley RPC and JSON-RPC do;
 * client- and bidi-streaming RPCs are left out (`passThrough`).
 */
export function createBodyReader<Req extends NodeRequest, Res extends NodeResponse>(
  options: BodyReaderOptions<Req, Res>,
  handler: (req: Req, res: Res) => void,
): (req: Req, res: Res) => void {
  const { maxBodyBytes, maxDiscardBytes, bodyTimeoutMs, refuseSlowBody, passThrough } = options;
  return (req, res) => {
    if (passThrough?.(req)) {
      handler(req, res);
      return;
    }
    const chunks: Buffer[] = [];
    let kept = 0;
    let received = 0;
    let tooLarge = false;

    const stop = () => {
      clearTimeout(timer);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onGone);
      req.off("close", onGone);
    };
    const handOver = (tooMuch: boolean) => {
      stop();
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, kept);
      (req as WithBody)[bodyKey] = { bytes, tooLarge, receivedBytes: received };
      // The stream was read to its end here: iterating the request yields what was read (one shared function).
      Object.defineProperty(req, Symbol.asyncIterator, { configurable: true, value: readBodyChunks });
      Object.defineProperty(req, "iterator", { configurable: true, value: readBodyChunks });
      if (tooMuch) discardTheRest(req, res, deadline);
      handler(req, res);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (!tooLarge) {
        if (kept + chunk.length <= maxBodyBytes) {
          chunks.push(chunk);
          kept += chunk.length;
          return;
        }
        tooLarge = true;
        const head = chunk.subarray(0, maxBodyBytes + 1 - kept);
        chunks.push(head);
        kept += head.length;
      }
      if (received - kept > maxDiscardBytes) handOver(true);
    };
    const onEnd = () => handOver(false);
    // The client went away before its body ended: there is no one to answer.
    const onGone = () => stop();
    const deadline = Date.now() + bodyTimeoutMs;
    const timer = setTimeout(() => {
      stop();
      const message = `the request body did not arrive within ${bodyTimeoutMs} ms (connections.bodyTimeoutMs); ${received} bytes came`;
      if ("stream" in req) {
        // The refusal has no trailers, so the stream is reset once it is out, and nothing of it is lost.
        const { stream } = req;
        stream.once("finish", () => stopRequestStream(req));
        refuseSlowBody(req, res, message);
      } else {
        req.pause();
        if (!res.headersSent) res.setHeader("Connection", "close");
        res.once("finish", () => req.destroy());
        refuseSlowBody(req, res, message);
      }
    }, bodyTimeoutMs);
    if (req.readableEnded) {
      onEnd();
      return;
    }
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onGone);
    req.on("close", onGone);
  };
}

/**
 * A too-large body went past `maxDiscardBytes`: its handler runs now and
 * refuses it. HTTP/1.1 stops reading and closes the connection after the
 * refusal (the client may then see a reset instead). HTTP/2 reads on and
 * throws the rest away until the body ends or its deadline, then resets the
 * stream alone: a reset right after the response could overtake its trailers,
 * and flow control keeps the reading cheap.
 */
function discardTheRest(req: NodeRequest, res: NodeResponse, deadline: number): void {
  if ("stream" in req) {
    const cut = setTimeout(() => stopRequestStream(req), Math.max(0, deadline - Date.now()));
    req.on("data", () => {});
    req.once("end", () => clearTimeout(cut));
    req.once("close", () => clearTimeout(cut));
    return;
  }
  req.pause();
  if (!res.headersSent) res.setHeader("Connection", "close");
  res.once("finish", () => req.destroy());
}
