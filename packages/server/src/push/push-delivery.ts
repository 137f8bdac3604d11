import { toJsonString } from "@bufbuild/protobuf";
import type { TaskEventSource } from "@parley/domain";
import { sleep } from "@parley/domain";
import {
  createDeadline,
  type StreamResponse,
  StreamResponseSchema,
  type TaskPushNotificationConfig,
} from "@parley/proto";
import type { Logger } from "pino";
import type { ParleyMetrics } from "../observability/metrics.js";
import { injectTraceHeaders } from "../observability/tracing.js";
import { type PushConfigs, pushDestinationRules } from "./push-configs.js";
import { resolvePushDestination } from "./push-destination.js";
import { postPinned } from "./push-request.js";
import type { PushSettings } from "./push-settings.js";

/** Content type of push notification bodies (A2A section 14.1). */
export const pushContentType = "application/a2a+json";
/** Header that carries a config's token to the receiver. */
export const pushTokenHeader = "X-A2A-Notification-Token";

export interface PushDelivery {
  /** Queues an event for the task's configs; returns at once. */
  onEvent(source: TaskEventSource, event: StreamResponse): void;
  /** Stops retrying, lets in-flight POSTs end (they are aborted) and resolves when every queue is gone. */
  close(): Promise<void>;
}

interface TaskQueue {
  readonly tenant: string;
  readonly taskId: string;
  readonly events: StreamResponse[];
}

/** `work`, or its signal's reason once that aborts first (dns.lookup takes no signal). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Why a POST will not succeed by trying again (the receiver refused it). */
class Refused extends Error {}

/** The destination itself is not allowed (its address, its host): nothing was sent. */
class DestinationRefused extends Refused {}

/**
 * Delivers task events to webhooks: one queue per task so each receiver sees
 * a task's events in order, drained off the task's own path so a slow or dead
 * receiver never holds the task. Configs are read per event, so a config
 * created or deleted mid-task takes effect from the next event on.
 */
export function createPushDelivery(deps: {
  readonly configs: PushConfigs;
  readonly config: PushSettings;
  readonly logger: Logger;
  readonly metrics?: ParleyMetrics;
}): PushDelivery {
  const { configs, logger, metrics } = deps;
  const { maxAttempts, retryBaseMs, timeoutMs } = deps.config.push;
  const rules = pushDestinationRules(deps.config);
  const queues = new Map<string, TaskQueue>();
  const drains = new Set<Promise<void>>();
  const stopping = new AbortController();

  async function post(target: TaskPushNotificationConfig, body: string): Promise<void> {
    // Checked again on every POST, against what the host resolves to now: the allow-lists may have been
    // narrowed since the config was stored, and a name may point elsewhere than it did.
    // One deadline for the resolution and the POST; a hanging resolver is cut like a hanging receiver.
    const deadline = createDeadline(timeoutMs, stopping.signal);
    try {
      await postBefore(target, body, deadline.signal);
    } catch (error) {
      throw deadline.expired ? new Error(`the receiver did not answer within ${timeoutMs} ms (push.timeoutMs)`) : error;
    } finally {
      deadline.clear();
    }
  }

  async function postBefore(target: TaskPushNotificationConfig, body: string, signal: AbortSignal): Promise<void> {
    const destination = await untilAborted(resolvePushDestination(target.url, rules), signal);
    if (!destination.ok) throw new DestinationRefused(destination.reason);
    const headers: Record<string, string> = { "Content-Type": pushContentType };
    const auth = target.authentication;
    if (auth && auth.scheme !== "") {
      headers.Authorization = auth.credentials === "" ? auth.scheme : `${auth.scheme} ${auth.credentials}`;
    }
    if (target.token !== "") headers[pushTokenHeader] = target.token;
    // Not fetch: its connection cannot be pinned to the checked address without undici's own Agent.
    const status = await postPinned(destination.value, injectTraceHeaders(headers), body, signal);
    if (status >= 200 && status < 300) return;
    const retryable = status >= 500 || status === 408 || status === 429;
    // A redirect could point anywhere; following it would bypass every check above.
    const reason = `the receiver answered HTTP ${status}${status >= 300 && status < 400 ? " (redirects are not followed)" : ""}`;
    throw retryable ? new Error(reason) : new Refused(reason);
  }

  async function deliver(queue: TaskQueue, target: TaskPushNotificationConfig, body: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await post(target, body);
        metrics?.push("delivered");
        return;
      } catch (error) {
        if (stopping.signal.aborted) return;
        if (error instanceof DestinationRefused) {
          metrics?.push("refused");
          logger.warn(
            { taskId: queue.taskId, configId: target.id, err: error.message },
            "push notification refused: its destination is not allowed",
          );
          return;
        }
        const final = error instanceof Refused || attempt >= maxAttempts;
        metrics?.push(final ? "dropped" : "retried");
        if (final) {
          logger.warn(
            { taskId: queue.taskId, configId: target.id, attempts: attempt, err: (error as Error).message },
            "push notification dropped",
          );
          return;
        }
        try {
          await sleep(retryBaseMs * 2 ** (attempt - 1), stopping.signal);
        } catch {
          return;
        }
      }
    }
  }

  async function drain(key: string, queue: TaskQueue): Promise<void> {
    try {
      while (queue.events.length > 0 && !stopping.signal.aborted) {
        const event = queue.events.shift()!;
        let targets: TaskPushNotificationConfig[];
        try {
          targets = await configs.all(queue.tenant, queue.taskId);
        } catch (error) {
          logger.error({ taskId: queue.taskId, err: error }, "could not read push notification configs");
          continue;
        }
        if (targets.length === 0) continue;
        const body = toJsonString(StreamResponseSchema, event);
        await Promise.all(targets.map((target) => deliver(queue, target, body)));
      }
    } finally {
      queues.delete(key);
    }
  }

  return {
    onEvent(source, event) {
      if (stopping.signal.aborted) return;
      const key = `${source.tenant}\u0000${source.taskId}`;
      const queued = queues.get(key);
      if (queued) {
        queued.events.push(event);
        return;
      }
      const queue: TaskQueue = { tenant: source.tenant, taskId: source.taskId, events: [event] };
      queues.set(key, queue);
      // Started on a later tick: onEvent runs inside the task's publish and must stay cheap.
      const running = Promise.resolve()
        .then(() => drain(key, queue))
        .finally(() => drains.delete(running));
      drains.add(running);
    },

    async close() {
      stopping.abort(new Error("the server is shutting down"));
      await Promise.allSettled([...drains]);
    },
  };
}
