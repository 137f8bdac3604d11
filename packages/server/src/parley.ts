import { setMaxListeners } from "node:events";
import { Code, ConnectError, type ConnectRouter, type Transport } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { Agent } from "@parley/domain";
import { createChainGuard, Engine, LeaseCoordinator, resumableStreamsExtension } from "@parley/domain";
import {
  createSilentRequestCheck,
  guardSessionSteps,
  guardSilence,
  type Resumable,
  recoverConversations,
  resolveServerId,
} from "@parley/domain/internal";
import {
  A2AService,
  AccessService,
  type AgentCard,
  file_lf_a2a_v1_a2a,
  file_parley_v1_access,
  file_parley_v1_session,
  file_parley_v1_target,
  file_parley_v1_thread,
  grpcHealthV1,
  grpcReflectionV1,
  grpcReflectionV1alpha,
  SessionService,
  TargetService,
  ThreadService,
} from "@parley/proto";
import {
  classifyDecodeErrors,
  createDecodeErrorInterceptor,
  createDirectTransport,
  createDualProtocolServer,
  createRpcHandler,
  createStrictTextDecoder,
  type DualProtocolServer,
  rpcFramingBytes,
  streamingRequestPaths,
  tlsEnabled,
} from "@parley/serving";
import { createStore, type PostgresBackend, type StoreBackend, type ThreadStore } from "@parley/store";
import { type AdvertisedEndpoints, buildAgentCard } from "./agent-card.js";
import { createA2APeerAgent } from "./agents/a2a-peer-agent.js";
import type { ParleyConfig } from "./config.js";
import { createAgents } from "./create-agents.js";
import { createHealthMonitor, type HealthMonitor } from "./health/health-monitor.js";
import { createHealthServiceImpl } from "./health/health-service.js";
import { createCallerInterceptor, tenantIn } from "./interceptors/caller-interceptor.js";
import { createLogger, type Logger } from "./logger.js";
import { createHttpFront } from "./observability/http-front.js";
import { instrumentAgent, instrumentStore, traceTurn } from "./observability/instrument.js";
import { createObservability, type Observability } from "./observability/observability.js";
import type { OperationsOptions } from "./observability/operations-options.js";
import { createObservingInterceptor } from "./observability/rpc-interceptor.js";
import { startTracing, tracingActive } from "./observability/tracing.js";
import { createPushConfigs } from "./push/push-configs.js";
import { createPushDelivery, type PushDelivery } from "./push/push-delivery.js";
import { createReflectionServices } from "./reflection/reflection-service.js";
import { createGuardedClock } from "./retention/guarded-clock.js";
import { retentionPolicy } from "./retention/retention-policy.js";
import { createRetentionSweeper, type RetentionSweeper } from "./retention/retention-sweeper.js";
import { createA2AServiceImpl } from "./services/a2a-service.js";
import { createAccessServiceImpl } from "./services/access-service.js";
import { createSessionServiceImpl } from "./services/session-service.js";
import { createTargetServiceImpl, peerAgentName } from "./services/target-service.js";
import { createThreadServiceImpl } from "./services/thread-service.js";

export interface Parley {
  readonly config: ParleyConfig;
  readonly engine: Engine;
  readonly store: ThreadStore;
  readonly logger: Logger;
  /** Metrics, request log and CORS policy; an embedded bridge shares them. */
  readonly observability: Observability;
  /** Readiness (store, PostgreSQL pool, draining), behind /readyz and grpc.health.v1. */
  readonly health: HealthMonitor;
  /** Registers every Parley service on a Connect router. */
  readonly routes: (router: ConnectRouter) => void;
  /** A Connect transport to every service in this process: no network hop, interceptors included. */
  inProcessTransport(): Transport;
  /**
   * Starts the listener: gRPC, Connect and gRPC-Web over HTTP/2 (h2c), and
   * Connect and gRPC-Web over HTTP/1.1 for browsers, on one port; resolves to "host:port".
   */
  listen(): Promise<{ readonly address: string }>;
  /** The agent card of an agent (the default one when `agent` is omitted). */
  agentCard(options: AdvertisedEndpoints & { readonly agent?: string }): AgentCard;
  /** The hosted agents' names; the first is the default. */
  agentNames(): string[];
  /** The retention policy's passes (run by the sweeper; `run()` starts one now). */
  readonly retention: Pick<RetentionSweeper, "run">;
  /**
   * The first half of a graceful stop: readiness turns false, the listener
   * stops accepting connections (HTTP/2 sessions get GOAWAY; calls in flight
   * go on), new sends are refused, and running tasks get
   * config.shutdownGraceMs to finish; the rest end FAILED (interrupted), so
   * every caller waiting on one gets its answer and every stream its final
   * event. Resolves when no task runs any more.
   */
  drain(): Promise<void>;
  /**
   * Graceful stop: drain(), then ends open streams, closes the listener and
   * the store.
   */
  close(): Promise<void>;
}

export interface CreateParleyOptions {
  readonly logger?: Logger;
  /** Overrides of config.operations (CORS origins, metrics, request logs), for embedders and tests. */
  readonly operations?: Partial<OperationsOptions>;
  /**
   * The clock of stored thread and task times and of the retention policy's idle times (Date.now by default);
   * tests move it instead of waiting for days.
   */
  readonly now?: () => number;
  /**
   * The monotonic clock retention checks `now` against (performance.now by default; `now` itself when only `now`
   * is injected, so a test that moves `now` sees threads age): a jump of `now` ahead of it ages no thread.
   */
  readonly monotonic?: () => number;
  /** False: connect-node serves every gRPC and Connect call, without Parley's own routes (bench rows compare). */
  readonly rpcRoutes?: boolean;
}

export async function createParley(config: ParleyConfig, options: CreateParleyOptions = {}): Promise<Parley> {
  const logger = options.logger ?? createLogger(config.logLevel);
  // Before anything is instrumented: with OTEL_* unset this is one resolved promise and no SDK.
  await startTracing("parley-server");
  const observability = createObservability(logger, { ...config.operations, ...options.operations });
  const { metrics } = observability;
  // A postgres:// storeUrl makes this process one of N replicas sharing that database; else LevelDB in dataDir.
  let healthRef: HealthMonitor | undefined;
  const backend = await createStore({
    url: config.storeUrl !== "" ? config.storeUrl : config.dataDir,
    sync: config.durability === "synced",
    writeBufferBytes: config.writeBufferMb * 1024 * 1024,
    timeoutMs: config.scaleOut.dbTimeoutMs,
    // node-postgres hangs the whole client (its config and statements) on the error: log what went wrong only.
    onError: (err) =>
      logger.warn(
        { err: { message: err.message, code: (err as { code?: string }).code } },
        "PostgreSQL connection trouble; reconnecting",
      ),
    // LevelDB: a failed write, writes resuming and damage found are operator news; readiness follows at once.
    onHealth: (storeHealth, detail) => {
      const cause = detail === undefined ? undefined : { message: (detail as Error).message ?? String(detail) };
      if (storeHealth.ok) logger.info({ err: cause }, "the store writes again");
      else if (storeHealth.condition === "damaged") {
        logger.error({ err: cause, reason: storeHealth.reason }, `the store is damaged: ${storeHealth.reason}`);
      } else logger.error({ err: cause, reason: storeHealth.reason }, `the store cannot write: ${storeHealth.reason}`);
      void healthRef?.readiness();
    },
    // One clock for stored times and retention, so a test that moves it sees threads age.
    ...(options.now ? { now: options.now } : {}),
  });
  const rawStore = backend.store;
  const store = instrumentStore(rawStore, metrics);
  let agents: Agent[];
  let serverId: string;
  try {
    serverId = resolveServerId(config);
    agents = createAgents(config.agents, config.peers, `parley@${config.host}:${config.port}`);
  } catch (error) {
    await backend.close();
    throw error;
  }
  // Conversations that no process runs any more (cut by a crash or a stop) are ended in the store, so a listing
  // never shows one as running forever. On PostgreSQL only those idle past two step timeouts: another replica may
  // still run the others.
  await recoverConversations(backend.conversations, {
    logger,
    ...(backend.kind === "postgres" ? { staleMs: 2 * config.limits.agentStepTimeoutMs } : {}),
  }).then(
    (ended) => {
      if (ended > 0) logger.info({ ended }, `ended ${ended} conversations interrupted by a stop`);
    },
    (err) => logger.warn({ err }, "could not read the conversations interrupted by a stop"),
  );
  // Both backends run the same lease and event-log code: PostgreSQL's shared leases and log, or LevelDB's
  // in-process leases and durable log. So a LevelDB server numbers, keeps and resumes task events as replicas do.
  // Created after the engine (its busy guard is part of the check); the sweeper's timer only starts passes later.
  let retention: RetentionSweeper | undefined;
  const coordinator = new LeaseCoordinator({
    store: backend.store,
    leases: backend.leases,
    events: backend.events,
    logger,
    ...config.scaleOut,
    ownsUnfinishedTasks: backend.kind === "level",
    ...(metrics ? { onTakeover: () => metrics.leaseTakeover() } : {}),
    onSweep: () => retention?.tick(),
  });
  const resumable: Resumable = { events: backend.events, coordinator };
  // Session steps reach agents through this guard so silence tokens and repeats are never stored;
  // every other turn through the silence guard, so a silent reply is never delivered or stored either.
  const tokens = config.sessions.silenceTokens;
  // Every configured peer is also addressable as agent "a2a:<peer>", so the targets ListTargets names can be used.
  const peerAgents = config.peers.map((peer) =>
    createA2APeerAgent({ name: peerAgentName(peer.name), peer, self: `parley@${config.host}:${config.port}` }),
  );
  const agentsByName = new Map(
    [...agents, ...peerAgents].map((a) => [
      a.name,
      guardSilence(guardSessionSteps(instrumentAgent(a, metrics), tokens), tokens),
    ]),
  );
  const chains = createChainGuard({
    serverId,
    limits: {
      maxHops: config.sessions.maxHops,
      stepBudget: config.sessions.chainStepBudget,
      deadlineMs: config.sessions.chainDeadlineMs,
    },
  });
  const push = config.capabilities.pushNotifications ? createPushConfigs({ store, config }) : undefined;
  // Without push the engine gets no listener at all, so publishing a task event costs nothing extra.
  const delivery: PushDelivery | undefined = push
    ? createPushDelivery({ configs: push, config, logger, ...(metrics ? { metrics } : {}) })
    : undefined;
  const engine = new Engine({
    store,
    agents: agentsByName,
    config,
    logger,
    chains,
    refuseSilentRequest: createSilentRequestCheck(tokens),
    ...(delivery ? { onEvent: delivery.onEvent } : {}),
    coordinator,
    ...(tracingActive() ? { wrapTurn: (run, agent, work) => traceTurn(agent, run.taskId, work) } : {}),
  });
  metrics?.watchRunningTasks(() => engine.runningCount);
  retention = createRetentionSweeper({
    retention: backend.retention,
    policy: retentionPolicy(config),
    intervalMs: config.retention.intervalMs,
    now: createGuardedClock(options.now ?? Date.now, options.monotonic ?? options.now ?? (() => performance.now())),
    busy: (key) => engine.busyRun(key.tenant, key.contextId) !== undefined,
    logger,
    ...(metrics ? { metrics } : {}),
  });
  const retentionSweeper = retention;
  if (backend.kind === "level") metrics?.watchStoreCommits(() => backend.commitStats());
  // With replicas, another one may be running any unfinished task: expired leases are the sweeper's.
  if (coordinator.ownsUnfinishedTasks) await engine.recover();

  const names = agents.map((a) => a.name);
  // What the bridge advertised in the public cards, so an extended card (GetExtendedAgentCard names no endpoints)
  // lists the same: the h2c address is the server's, a JSON-RPC URL is one agent's own (`/agents/<name>/`).
  let advertisedGrpc: string | undefined;
  const advertisedJsonRpc = new Map<string, string>();
  const agentCard = (opts: AdvertisedEndpoints & { readonly agent?: string } = {}, extended = false): AgentCard => {
    const name = opts.agent ?? names[0]!;
    const agent = agentsByName.get(name);
    if (!agent)
      throw new ConnectError(`no agent named ${JSON.stringify(name)}; hosted: ${names.join(", ")}`, Code.NotFound);
    if (opts.grpcAddress !== undefined) advertisedGrpc = opts.grpcAddress;
    if (opts.jsonRpcUrl !== undefined) advertisedJsonRpc.set(name, opts.jsonRpcUrl);
    const jsonRpcUrl = opts.jsonRpcUrl ?? advertisedJsonRpc.get(name);
    const grpcAddress = opts.grpcAddress ?? advertisedGrpc;
    const endpoints: AdvertisedEndpoints = {
      ...(jsonRpcUrl !== undefined ? { jsonRpcUrl } : {}),
      ...(grpcAddress !== undefined ? { grpcAddress } : {}),
    };
    const card = buildAgentCard(config, agent, endpoints, { isDefault: name === names[0], extended });
    // Every backend keeps a task event log; without streaming there is no stream to resume.
    if (config.capabilities.streaming) card.capabilities?.extensions.push(resumableStreamsExtension());
    return card;
  };

  const observing = createObservingInterceptor(observability, tenantIn);
  // The decode interceptor first: it marks every request that got past decoding (see decode-errors.ts).
  const decoded = createDecodeErrorInterceptor();
  const interceptors = [
    decoded,
    observing,
    createCallerInterceptor(config, [...names, ...peerAgents.map((a) => a.name)], logger),
  ];
  const health = createHealthMonitor({ probe: readinessProbe(rawStore, backend) });
  healthRef = health;
  // One instance for every router (listener and in-process), so they share the conversations.
  const sessionService = createSessionServiceImpl({
    engine,
    store,
    conversations: backend.conversations,
    config,
    logger,
    chains,
    agentNames: names,
    self: () => `parley@${advertisedGrpc ?? `${config.host}:${config.port}`}`,
  });
  // One instance of each service for every router and the direct transport, so they share state.
  const services = [
    {
      service: A2AService,
      impl: createA2AServiceImpl({
        engine,
        store,
        config,
        extendedCard: (agent) => agentCard({ agent }, true),
        ...(push ? { push } : {}),
        resumable,
      }),
    },
    { service: ThreadService, impl: createThreadServiceImpl({ store, engine, leases: backend.leases }) },
    { service: SessionService, impl: sessionService },
    { service: TargetService, impl: createTargetServiceImpl({ store, agents, peers: config.peers }) },
    {
      service: AccessService,
      impl: createAccessServiceImpl({ openMode: Object.keys(config.apiKeys).length === 0, agentNames: names }),
    },
  ] as const;
  const serviceNames = services.map((s) => s.service.typeName);
  const reflection = createReflectionServices(
    [
      file_lf_a2a_v1_a2a,
      file_parley_v1_thread,
      file_parley_v1_access,
      file_parley_v1_session,
      file_parley_v1_target,
      grpcHealthV1.file_grpc_health_v1_health,
      grpcReflectionV1.file_grpc_reflection_v1_reflection,
      grpcReflectionV1alpha.file_grpc_reflection_v1alpha_reflection,
    ],
    [
      ...serviceNames,
      grpcHealthV1.Health.typeName,
      grpcReflectionV1.ServerReflection.typeName,
      grpcReflectionV1alpha.ServerReflection.typeName,
    ],
  );
  // Health and reflection answer without credentials or rate limits (probes and grpcurl carry no API key):
  // service-level interceptors replace the router's, so only the observing one runs for them.
  const openServiceOptions = { interceptors: [decoded, observing] };
  const routes = classifyDecodeErrors((router: ConnectRouter) => {
    for (const { service, impl } of services) router.service(service, impl as never);
    router.service(grpcHealthV1.Health, createHealthServiceImpl(health, serviceNames), openServiceOptions);
    router.service(grpcReflectionV1.ServerReflection, reflection.v1, openServiceOptions);
    router.service(grpcReflectionV1alpha.ServerReflection, reflection.v1alpha, openServiceOptions);
  });
  const shutdown = new AbortController();
  // Every in-flight RPC listens on the shutdown signal; thousands of open streams are expected.
  setMaxListeners(0, shutdown.signal);
  const routerOptions = {
    interceptors,
    // connect-node's own default, named here so Parley's own routes take the same encodings.
    acceptCompression: [compressionGzip, compressionBrotli],
    readMaxBytes: config.limits.maxMessageBytes,
    shutdownSignal: shutdown.signal,
    // Forward compatibility (A2A: ignore unrecognised fields): a peer a minor version ahead is served, and
    // what this version does not know is dropped, never stored or echoed back (JSON and binary alike).
    // Invalid UTF-8 is refused as on gRPC and JSON-RPC, not stored as U+FFFD (connect-es's JSON codec reads
    // textDecoder, its JsonSerializationOptions, although the router's option type does not name it).
    jsonOptions: { ignoreUnknownFields: true, textDecoder: createStrictTextDecoder() },
    binaryOptions: { readUnknownFields: false },
  };

  const callable = new Map(services.map((s) => [s.service.typeName, s]));
  let server: DualProtocolServer | undefined;
  let closing: Promise<void> | undefined;
  let draining: Promise<void> | undefined;

  const parley: Parley = {
    config,
    engine,
    store,
    logger,
    observability,
    health,
    routes,
    inProcessTransport: () => createDirectTransport(callable, interceptors, shutdown.signal),
    agentCard: (opts) => agentCard(opts),
    agentNames: () => [...names],
    retention: { run: () => retentionSweeper.run() },
    async listen() {
      if (server) throw new Error("parley is already listening");
      const served = { routes, routerOptions, services: callable, shutdownSignal: shutdown.signal };
      const rpc = createRpcHandler({ ...served, ownRoutes: options.rpcRoutes });
      const listener = createDualProtocolServer(createHttpFront({ observability, health }, rpc), {
        limits: config.connections,
        maxBodyBytes: config.limits.maxMessageBytes + rpcFramingBytes,
        streamingRequestPaths: streamingRequestPaths(routes),
        ...(tlsEnabled(config.tls) ? { tls: { files: config.tls, log: logger } } : {}),
      });
      const { port } = await listener.listen(config.port, config.host);
      server = listener;
      const host = config.host.includes(":") ? `[${config.host}]` : config.host;
      const address = `${host}:${port}`;
      advertisedGrpc = address;
      logger.info(
        { address, tls: tlsEnabled(config.tls) },
        tlsEnabled(config.tls)
          ? "serving gRPC, Connect and gRPC-Web over TLS (h2 and HTTP/1.1 by ALPN)"
          : "serving gRPC, Connect and gRPC-Web (HTTP/2 h2c; Connect and gRPC-Web also over HTTP/1.1)",
      );
      return { address };
    },
    drain() {
      draining ??= (async () => {
        // Health checks answer NOT_SERVING from here on, and no new connection is taken, while running tasks
        // finish on the connections they came in on.
        health.drain();
        server?.stopAccepting();
        await engine.shutdown(config.shutdownGraceMs);
      })();
      return draining;
    },
    close() {
      closing ??= (async () => {
        await parley.drain();
        await delivery?.close();
        shutdown.abort(new ConnectError("the server is shutting down", Code.Unavailable));
        await server?.close();
        await retentionSweeper.close();
        await coordinator.close();
        await backend.close();
        logger.info("stopped");
      })();
      return closing;
    },
  };
  return parley;
}

/** Readiness: the store answers a read, and with PostgreSQL the pool hands out a connection that answers. */
function readinessProbe(store: ThreadStore, backend: StoreBackend) {
  return async (): Promise<Record<string, string>> => {
    const checks: Record<string, string> = {};
    // LevelDB: writes failing or damage found make the store not ready even while its reads answer.
    const storeHealth = backend.kind === "level" ? backend.health() : undefined;
    // createStore's PostgreSQL backend is a PostgresBackend: its pool is what readiness checks.
    const pool = backend.kind === "postgres" && "pool" in backend ? (backend as PostgresBackend).pool : undefined;
    await Promise.all([
      store.getThread({ tenant: "parley-readiness", contextId: "probe" }).then(
        () => (checks.store = storeHealth === undefined || storeHealth.ok ? "ok" : storeHealth.reason),
        (error: unknown) => (checks.store = `the store failed a read: ${(error as Error).message}`),
      ),
      pool
        ? pool.query("SELECT 1").then(
            () => (checks.postgresPool = "ok"),
            (error: unknown) =>
              (checks.postgresPool = `no PostgreSQL connection (${pool.totalCount} open, ${pool.waitingCount} waiting): ${(error as Error).message}`),
          )
        : undefined,
    ]);
    return checks;
  };
}
