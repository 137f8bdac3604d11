import { createDeadline } from "@parley/proto";

/** One readiness check's result: "ok", or what is wrong. */
export type CheckResult = "ok" | string;

export interface Readiness {
  readonly ready: boolean;
  readonly draining: boolean;
  /** Each dependency's result, by name ("store", "postgresPool", "upstream"). */
  readonly checks: Readonly<Record<string, CheckResult>>;
}

/** A readiness probe: resolves with per-dependency results, or rejects when the dependency cannot be reached. */
export type ReadinessProbe = (signal: AbortSignal) => Promise<Readonly<Record<string, CheckResult>>>;

export interface HealthMonitor {
  /** Runs the probe (at most one at a time; concurrent callers share its answer). */
  readiness(): Promise<Readiness>;
  readonly draining: boolean;
  /** The server is about to stop: from now on it reports not ready, and every watcher hears so at once. */
  drain(): void;
  /** Calls `listener` with each change of readiness (polled while anyone listens); returns the unsubscribe. */
  watch(listener: (ready: boolean) => void): () => void;
}

export interface HealthMonitorOptions {
  readonly probe: ReadinessProbe;
  /** A probe that takes longer counts as failed. */
  readonly probeTimeoutMs?: number;
  /** How often readiness is re-checked while watchers are subscribed. */
  readonly pollMs?: number;
}

/**
 * Liveness is the process answering at all; readiness is this monitor: every
 * dependency reachable and the server not draining. Probes run on demand (a
 * scrape, a health check) and not on a timer, unless a Watch stream listens.
 */
export function createHealthMonitor(options: HealthMonitorOptions): HealthMonitor {
  const timeoutMs = options.probeTimeoutMs ?? 2_000;
  const pollMs = options.pollMs ?? 5_000;
  let draining = false;
  let inFlight: Promise<Readiness> | undefined;
  let last: boolean | undefined;
  const listeners = new Set<(ready: boolean) => void>();
  let poller: NodeJS.Timeout | undefined;

  const publish = (ready: boolean) => {
    if (ready === last) return;
    last = ready;
    for (const listener of listeners) listener(ready);
  };

  const run = async (): Promise<Readiness> => {
    if (draining) return { ready: false, draining, checks: {} };
    let checks: Readonly<Record<string, CheckResult>>;
    const deadline = createDeadline(timeoutMs);
    const signal = deadline.signal;
    try {
      checks = await Promise.race([
        options.probe(signal),
        new Promise<never>((_, reject) =>
          signal.addEventListener("abort", () => reject(new Error(`no answer within ${timeoutMs} ms`)), {
            once: true,
          }),
        ),
      ]);
    } catch (error) {
      checks = { probe: error instanceof Error ? error.message : String(error) };
    } finally {
      deadline.clear();
    }
    const ready = !draining && Object.values(checks).every((c) => c === "ok");
    return { ready, draining, checks };
  };

  const monitor: HealthMonitor = {
    get draining() {
      return draining;
    },
    readiness() {
      inFlight ??= run().finally(() => {
        inFlight = undefined;
      });
      return inFlight.then((r) => {
        publish(r.ready);
        return r;
      });
    },
    drain() {
      if (draining) return;
      draining = true;
      publish(false);
    },
    watch(listener) {
      listeners.add(listener);
      if (!poller) {
        poller = setInterval(() => void monitor.readiness(), pollMs);
        poller.unref();
      }
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0 && poller) {
          clearInterval(poller);
          poller = undefined;
        }
      };
    },
  };
  return monitor;
}
