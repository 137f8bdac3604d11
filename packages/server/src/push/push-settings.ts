/** The `push` settings the push configs and their delivery read; the server's config satisfies them. */
export interface PushSettings {
  readonly push: {
    readonly allowedHosts: readonly string[];
    /** Non-public addresses notifications may reach (IPs or CIDRs). */
    readonly allowedAddresses: readonly string[];
    readonly maxAttempts: number;
    readonly retryBaseMs: number;
    readonly timeoutMs: number;
    readonly maxConfigsPerTask: number;
  };
}
