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
 * True for an error raised by PostgreSQL or its client library (a SQLSTATE with a severity, or an
 * unavailable database): its text is the database's, for the server log, never for a caller.
 */
export function isDatabaseError(error: unknown): boolean {
  if (isDatabaseUnavailable(error)) return true;
  const e = error as { code?: unknown; severity?: unknown } | undefined;
  return typeof e?.code === "string" && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.severity === "string";
}
