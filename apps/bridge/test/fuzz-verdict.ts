// The verdict on one fuzz request's outcome: a well-formed answer (a result, a named client error, an
// expected HTTP refusal) or a problem that says what the bridge got wrong.
import { JsonRpcCode } from "../src/json-rpc-error.js";
import type { Generated } from "./fuzz-requests.js";
import type { RawOutcome, RawResponse } from "./raw-http.js";

/** Every code the bridge may answer a client mistake with; -32603 (internal) is deliberately absent. */
const clientErrorCodes = new Set<number>(
  Object.values(JsonRpcCode).filter((c) => c !== JsonRpcCode.InternalError && c !== JsonRpcCode.InvalidAgentResponse),
);

function normalized(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]/g, "");
}

function checkRpcObject(body: unknown, req: Generated): { code: string } | { problem: string } {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return { problem: "answer is not an object" };
  const o = body as Record<string, unknown>;
  if (o.jsonrpc !== "2.0") return { problem: `jsonrpc is ${JSON.stringify(o.jsonrpc)}` };
  if (!("id" in o)) return { problem: "answer has no id" };
  // A body that does not parse has no id to echo: JSON-RPC answers a parse error with null.
  const parseError = (o.error as { code?: unknown } | undefined)?.code === JsonRpcCode.ParseError;
  if (req.expectId !== undefined && o.id !== req.expectId && !(parseError && o.id === null))
    return { problem: `answered id ${JSON.stringify(o.id)}, asked with ${JSON.stringify(req.expectId)}` };
  if ("result" in o === "error" in o) return { problem: "answer needs exactly one of result and error" };
  if ("result" in o) return { code: "result" };
  const error = o.error as { code?: unknown; message?: unknown } | null;
  if (!error || typeof error.code !== "number" || !Number.isInteger(error.code))
    return { problem: `error code ${JSON.stringify(error?.code)}` };
  if (typeof error.message !== "string" || error.message.trim() === "") return { problem: "error without a message" };
  if (!clientErrorCodes.has(error.code))
    return { problem: `the bridge faulted (${error.code}) on bad input: ${error.message.slice(0, 300)}` };
  if (error.code === JsonRpcCode.InvalidParams && req.mutatedKeys && req.mutatedKeys.length > 0) {
    const said = normalized(error.message);
    // The store calls a page token a cursor ("listTasks cursor is not a cursor issued by this store").
    const names = req.mutatedKeys.flatMap((k) => (k === "pageToken" ? [k, "cursor"] : [k]));
    if (!names.some((k) => said.includes(normalized(k)))) {
      return { problem: `invalid params without naming ${req.mutatedKeys.join(".")}: ${error.message.slice(0, 300)}` };
    }
  }
  return { code: String(error.code) };
}

function parseSse(body: string): unknown[] | undefined {
  const out: unknown[] = [];
  for (const block of body.split("\n\n")) {
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice(6))
      .join("");
    if (data === "") continue;
    try {
      out.push(JSON.parse(data));
    } catch {
      return undefined;
    }
  }
  return out;
}

/** The request's body as JSON, or undefined when it is not JSON. */
function requestJson(req: Generated): unknown {
  try {
    return JSON.parse(req.body.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** Says what is wrong with an outcome, or what it was ("result", a JSON-RPC code, http-NNN, closed). */
export function judge(req: Generated, outcome: RawOutcome): { code: string } | { problem: string } {
  if ("closed" in outcome) {
    // Only a request the client itself cut short, or one the server refused mid-upload, may end without an answer.
    if (req.mode === "truncated" || req.mode === "garbage" || req.category === "over-limit")
      return { code: `closed-${req.category}` };
    return { problem: `connection ended without an answer (${outcome.closed})` };
  }
  const res: RawResponse = outcome.response;
  const type = res.headers["content-type"] ?? "";
  const text = res.body.toString("utf8");
  const parsed = () => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return undefined;
    }
  };
  switch (res.status) {
    case 200: {
      if (type.startsWith("text/event-stream")) {
        const events = parseSse(text);
        if (!events || events.length === 0) return { problem: "SSE answer without parseable events" };
        for (const event of events) {
          const verdict = checkRpcObject(event, req);
          if ("problem" in verdict) return { problem: `SSE event: ${verdict.problem}` };
        }
        return { code: "sse" };
      }
      if (req.method === "GET" && req.path.endsWith("agent-card.json")) return { code: "card" };
      if (!type.startsWith("application/json")) return { problem: `200 with content-type ${type}` };
      return checkRpcObject(parsed(), req);
    }
    case 204: {
      // A notification (an envelope without an id member) is processed and answered with nothing.
      const body = requestJson(req);
      return body !== null && typeof body === "object" && !Array.isArray(body) && !("id" in body) && text === ""
        ? { code: "http-204-notification" }
        : { problem: `204 to a request that is not a notification: ${text.slice(0, 200)}` };
    }
    case 415: {
      // A request without Content-Type: application/json (garbage that still parses as HTTP carries none).
      if (req.category !== "wrong-content-type" && req.mode !== "garbage") return { problem: `415 to ${req.category}` };
      const verdict = checkRpcObject(parsed(), req);
      if ("problem" in verdict) return verdict;
      return verdict.code === String(JsonRpcCode.InvalidRequest)
        ? { code: "http-415" }
        : { problem: `415 with code ${verdict.code}` };
    }
    case 400:
      // node's HTTP parser refused the request before the bridge saw it.
      return req.mode === "garbage" || req.mode === "truncated"
        ? { code: "http-400" }
        : { problem: `HTTP 400 to a well-framed request: ${text.slice(0, 200)}` };
    case 404: {
      if (req.category !== "odd-path") return { problem: `404 ${text.slice(0, 200)}` };
      const body = parsed() as { error?: unknown } | undefined;
      // A path the bridge does not serve: plain JSON naming the paths it does.
      if (typeof body?.error === "string" && body.error !== "") return { code: "http-404" };
      // The JSON-RPC URL of an agent that is not hosted: a JSON-RPC error (with the request's id) naming the known ones.
      const verdict = checkRpcObject(body, req);
      if ("problem" in verdict) return { problem: `404: ${verdict.problem}` };
      return verdict.code === String(JsonRpcCode.InvalidParams) && text.includes("known agents: ")
        ? { code: "http-404-rpc" }
        : { problem: `404 ${text.slice(0, 200)}` };
    }
    case 405: {
      if (req.category !== "wrong-http-method") return { problem: `405 for ${req.method}` };
      if (!res.headers.allow) return { problem: "405 without an Allow header" };
      if (req.method === "HEAD") return { code: "http-405" };
      const body = parsed() as { error?: unknown } | undefined;
      const message =
        typeof body?.error === "string" ? body.error : (body?.error as { message?: string } | undefined)?.message;
      return typeof message === "string" && message.includes(req.method)
        ? { code: "http-405" }
        : { problem: `405 that does not name the method: ${text.slice(0, 200)}` };
    }
    case 413: {
      if (req.category !== "over-limit") return { problem: "413 under the body limit" };
      const verdict = checkRpcObject(parsed(), req);
      if ("problem" in verdict) return verdict;
      return /request body too large/.test(text) ? { code: "http-413" } : { problem: `413 says ${text.slice(0, 200)}` };
    }
    case 431:
      return req.mode === "garbage" ? { code: "http-431" } : { problem: "431 to ordinary headers" };
    default:
      return { problem: `HTTP ${res.status} ${type}: ${text.slice(0, 300)}` };
  }
}
