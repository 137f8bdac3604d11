// Which failures of the PostgreSQL backend mean "the database is away" (retry later) rather than a fault.

/**
 * SQLSTATEs of a database that is unreachable, restarting, overloaded or out of time: class 08 (connection
 * exception), admin/crash shutdown and "cannot connect now" (57P01-57P03), too many connections (53300),
 * a statement cut by statement_timeout (57014), and the transient conflicts a retry resolves (40001, 40P01).
 */
const unavailableStates = new Set(["57P01", "57P02", "57P03", "53300", "57014", "40001", "40P01"]);
/** Socket errors of a connection that could not be made or was lost. */
const socketCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "EAI_AGAIN",
  "ENOTFOUND",
]);
/** node-postgres's own messages for a lost or timed-out connection (they carry no code). */
const clientMessages =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|not queryable|connection timeout|Connection ended|the PostgreSQL listener was closed|the PostgreSQL listener could not connect/i;

/** True when `error` (or its cause) says the database could not be reached or answer in time. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (
    let e = error, depth = 0;
    e && typeof e === "object" && depth < 4;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (code.startsWith("08") || unavailableStates.has(code) || socketCodes.has(code))) {
      return true;
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && clientMessages.test(message)) return true;
  }
  return false;
}

/**
 * True for an error raised by PostgreSQL (a SQLSTATE with a severity) or by node-postgres about its
 * connection: its text is the database's, for the server log, never for a caller. Bare socket errors
 * (ECONNREFUSED, ...) are not claimed here, since any outgoing call raises them; on a store call they
 * are the database's, which isDatabaseUnavailable says.
 */
export function isDatabaseError(error: unknown): boolean {
  for (
    let e = error, depth = 0;
    e && typeof e === "object" && depth < 4;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const { code, severity, message } = e as { code?: unknown; severity?: unknown; message?: unknown };
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && typeof severity === "string") return true;
    if (typeof message === "string" && clientMessages.test(message)) return true;
  }
  return false;
}
