import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** Where a request arrived: the server port's protocols, the bridge's JSON-RPC, or an in-process call. */
export type RequestProtocol = "grpc" | "grpc-web" | "connect" | "jsonrpc" | "rest" | "in-process" | "http";

/** Outcomes of one push notification POST. */
export type PushOutcome = "delivered" | "retried" | "dropped" | "refused";

/**
 * The Prometheus metrics of one process. Every label has a small, fixed set of
 * values (method names, codes, reasons, agent names, store operations): no
 * contextId, task id or tenant ever becomes a label, so the series count stays
 * bounded whatever the traffic.
 */
export interface ParleyMetrics {
  readonly registry: Registry;
  /** The Prometheus text exposition of every metric. */
  render(): Promise<string>;
  readonly contentType: string;
  /** One finished request: its method ("lf.a2a.v1.A2AService/SendMessage", "SendMessage"), outcome code and duration. */
  request(protocol: RequestProtocol, method: string, code: string, seconds: number): void;
  /** A request refused for a typed reason (CONTEXT_BUSY, LOOP_DETECTED, HOP_LIMIT, RATE_LIMITED, ...). */
  rejection(reason: string): void;
  streamOpened(protocol: RequestProtocol): void;
  streamClosed(protocol: RequestProtocol): void;
  agentStep(agent: string, outcome: "ok" | "error", seconds: number): void;
  storeOperation(operation: string, outcome: "ok" | "error", seconds: number): void;
  push(outcome: PushOutcome): void;
  leaseTakeover(): void;
  /** What one batch of a retention pass deleted (counted as it goes, so a long pass shows its progress). */
  retentionDeleted(counts: { threads: number; messages: number; tasks: number; skipped: number }): void;
  /** One retention pass ended: its outcome, its duration and when it ended (epoch ms of the retention clock). */
  retentionRun(outcome: "ok" | "error", seconds: number, endedAtMs: number): void;
  /** Reports the engine's running task count at every scrape. */
  watchRunningTasks(read: () => number): void;
  /** Reports the LevelDB group commit's counts at every scrape (writes, batches, fsynced batches). */
  watchStoreCommits(read: () => StoreCommitCounts): void;
}

/** The LevelDB group commit's counts since the store opened. */
export interface StoreCommitCounts {
  readonly writes: number;
  readonly batches: number;
  readonly syncedBatches: number;
}

// Seconds: from a fast unary call (sub-millisecond in process) to a long agent step (the 120 s step limit).
const latencyBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const storeBuckets = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

export interface CreateMetricsOptions {
  /** Also export the process's CPU, memory, event-loop lag and GC figures (prom-client's default set). */
  readonly processMetrics?: boolean;
}

export function createParleyMetrics(options: CreateMetricsOptions = {}): ParleyMetrics {
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "parley_requests_total",
    help: "Finished requests by protocol, method and outcome code (gRPC code name, or the JSON-RPC error code)",
    labelNames: ["protocol", "method", "code"] as const,
    registers: [registry],
  });
  const requestSeconds = new Histogram({
    name: "parley_request_duration_seconds",
    help: "Request latency, to the last byte of a stream, by protocol and method",
    labelNames: ["protocol", "method"] as const,
    buckets: latencyBuckets,
    registers: [registry],
  });
  const rejections = new Counter({
    name: "parley_rejections_total",
    help: "Requests refused for a typed reason: CONTEXT_BUSY, LOOP_DETECTED, HOP_LIMIT, RATE_LIMITED, LIMIT_EXCEEDED, ...",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  const openStreams = new Gauge({
    name: "parley_open_streams",
    help: "Response streams open right now, by protocol",
    labelNames: ["protocol"] as const,
    registers: [registry],
  });
  let readRunning: (() => number) | undefined;
  new Gauge({
    name: "parley_running_tasks",
    help: "Tasks whose agent is running in this process",
    registers: [registry],
    collect() {
      this.set(readRunning ? readRunning() : 0);
    },
  });
  const agentSeconds = new Histogram({
    name: "parley_agent_step_duration_seconds",
    help: "How long one agent step (one reply) took, by agent name and outcome",
    labelNames: ["agent", "outcome"] as const,
    buckets: latencyBuckets,
    registers: [registry],
  });
  const storeSeconds = new Histogram({
    name: "parley_store_operation_duration_seconds",
    help: "Store operation latency by operation (append, tail, getTask, ...) and outcome",
    labelNames: ["operation", "outcome"] as const,
    buckets: storeBuckets,
    registers: [registry],
  });
  const pushes = new Counter({
    name: "parley_push_deliveries_total",
    help: "Push notification POSTs by outcome: delivered, retried (a failed try that is retried), dropped, refused (its destination is not allowed: nothing was sent)",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  const takeovers = new Counter({
    name: "parley_lease_takeovers_total",
    help: "Expired context leases this replica took over from a replica that stopped renewing them",
    registers: [registry],
  });
  const retentionThreads = new Counter({
    name: "parley_retention_threads_purged_total",
    help: "Idle threads the retention policy deleted, with their tasks, push configs and event logs",
    registers: [registry],
  });
  const retentionMessages = new Counter({
    name: "parley_retention_messages_purged_total",
    help: "Messages of the threads the retention policy deleted",
    registers: [registry],
  });
  const retentionTasks = new Counter({
    name: "parley_retention_tasks_purged_total",
    help: "Tasks of the threads the retention policy deleted",
    registers: [registry],
  });
  const retentionSkipped = new Counter({
    name: "parley_retention_skipped_busy_total",
    help: "Idle threads a retention pass left alone because a task held their context (counted per pass)",
    registers: [registry],
  });
  const retentionRuns = new Counter({
    name: "parley_retention_runs_total",
    help: "Retention passes by outcome (ok, error)",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  const retentionErrors = new Counter({
    name: "parley_retention_errors_total",
    help: "Retention passes that failed (the next pass retries; the log has the cause)",
    registers: [registry],
  });
  const retentionSeconds = new Histogram({
    name: "parley_retention_run_duration_seconds",
    help: "How long one retention pass took",
    buckets: latencyBuckets,
    registers: [registry],
  });
  const retentionLastRun = new Gauge({
    name: "parley_retention_last_run_timestamp_seconds",
    help: "When the last retention pass ended (0: none yet)",
    registers: [registry],
  });
  const retentionLastSuccess = new Gauge({
    name: "parley_retention_last_success_timestamp_seconds",
    help: "When the last retention pass that succeeded ended (0: none yet)",
    registers: [registry],
  });
  let readCommits: (() => StoreCommitCounts) | undefined;
  new Counter({
    name: "parley_store_writes_total",
    help: "Atomic writes the server asked LevelDB for (a turn's inbound message, its reply, a batch of task events, ...)",
    registers: [registry],
    collect() {
      this.reset();
      if (readCommits) this.inc(readCommits().writes);
    },
  });
  new Counter({
    name: "parley_store_commits_total",
    help: "LevelDB batches written by the group commit, by synced (true: the batch ended with an fsync); writes / commits is how many writes shared one",
    labelNames: ["synced"] as const,
    registers: [registry],
    collect() {
      this.reset();
      if (!readCommits) return;
      const { batches, syncedBatches } = readCommits();
      this.inc({ synced: "true" }, syncedBatches);
      this.inc({ synced: "false" }, batches - syncedBatches);
    },
  });
  return {
    registry,
    contentType: registry.contentType,
    render: () => registry.metrics(),
    request(protocol, method, code, seconds) {
      requests.inc({ protocol, method, code });
      requestSeconds.observe({ protocol, method }, seconds);
    },
    rejection: (reason) => rejections.inc({ reason }),
    streamOpened: (protocol) => openStreams.inc({ protocol }),
    streamClosed: (protocol) => openStreams.dec({ protocol }),
    agentStep: (agent, outcome, seconds) => agentSeconds.observe({ agent, outcome }, seconds),
    storeOperation: (operation, outcome, seconds) => storeSeconds.observe({ operation, outcome }, seconds),
    push: (outcome) => pushes.inc({ outcome }),
    leaseTakeover: () => takeovers.inc(),
    retentionDeleted({ threads, messages, tasks, skipped }) {
      retentionThreads.inc(threads);
      retentionMessages.inc(messages);
      retentionTasks.inc(tasks);
      retentionSkipped.inc(skipped);
    },
    retentionRun(outcome, seconds, endedAtMs) {
      retentionRuns.inc({ outcome });
      retentionSeconds.observe(seconds);
      retentionLastRun.set(endedAtMs / 1000);
      if (outcome === "ok") retentionLastSuccess.set(endedAtMs / 1000);
      else retentionErrors.inc();
    },
    watchRunningTasks(read) {
      readRunning = read;
    },
    watchStoreCommits(read) {
      readCommits = read;
    },
  };
}
