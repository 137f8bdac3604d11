/** Who is calling, as established by the interceptors. */
export interface Caller {
  readonly tenant: string;
  /** The agent that answers (already resolved to a hosted agent's name). */
  readonly agent: string;
}
