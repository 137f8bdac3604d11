import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { grpcHealthV1 } from "@parley/proto";
import type { HealthMonitor } from "./health-monitor.js";

const { HealthCheckResponse_ServingStatus: ServingStatus } = grpcHealthV1;
type ServingStatus = grpcHealthV1.HealthCheckResponse_ServingStatus;

/**
 * grpc.health.v1.Health: the empty service name means the whole server, and
 * every service this server registers has the same status (they share one
 * engine and one store). NOT_SERVING while not ready or draining.
 */
export function createHealthServiceImpl(
  monitor: HealthMonitor,
  serviceNames: readonly string[],
): ServiceImpl<typeof grpcHealthV1.Health> {
  const known = new Set(["", ...serviceNames]);
  const statusOf = (ready: boolean): ServingStatus => (ready ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  return {
    async check(req) {
      if (!known.has(req.service)) {
        throw new ConnectError(
          `unknown service ${JSON.stringify(req.service)}; known: "" (the server), ${serviceNames.join(", ")}`,
          Code.NotFound,
        );
      }
      return { status: statusOf((await monitor.readiness()).ready) };
    },
    async list() {
      const status = statusOf((await monitor.readiness()).ready);
      return { statuses: Object.fromEntries([...known].map((name) => [name, { status }])) };
    },
    async *watch(req, ctx) {
      if (!known.has(req.service)) {
        // The protocol keeps the stream open for a service that may appear later; this server's set is fixed.
        yield { status: ServingStatus.SERVICE_UNKNOWN };
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        return;
      }
      const queue: boolean[] = [];
      let wake: (() => void) | undefined;
      const unsubscribe = monitor.watch((ready) => {
        queue.push(ready);
        wake?.();
      });
      const aborted = new Promise<void>((resolve) =>
        ctx.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      try {
        let current = (await monitor.readiness()).ready;
        yield { status: statusOf(current) };
        while (!ctx.signal.aborted) {
          if (queue.length === 0) {
            await Promise.race([new Promise<void>((resolve) => (wake = resolve)), aborted]);
            wake = undefined;
            continue;
          }
          const next = queue.shift()!;
          if (next === current) continue;
          current = next;
          yield { status: statusOf(current) };
        }
      } finally {
        unsubscribe();
      }
    },
  };
}
