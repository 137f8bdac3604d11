import { setMaxListeners } from "node:events";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, type ConnectRouter, type Transport } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { A2AService, type AgentCard, SessionService, TargetService, ThreadService } from "@parley/proto";
import { createStore, type ThreadStore } from "@parley/store";
import { type AdvertisedEndpoints, buildAgentCard } from "./agent-card.js";
import type { Agent } from "./agents/agent.js";
import { createAgents } from "./agents/create-agents.js";
import { guardSessionSteps } from "./agents/step-guard.js";
import type { ParleyConfig } from "./config.js";
import { createDirectTransport } from "./direct-transport.js";
import { Engine } from "./engine/engine.js";
import { createLocalCoordinator, type ReplicaCoordinator } from "./engine/replica-coordinator.js";
import { createCallerInterceptor } from "./interceptors/caller-interceptor.js";
import { createLogger, type Logger } from "./logger.js";
import { createPushConfigs } from "./push/push-configs.js";
import { createPushDelivery, type PushDelivery } from "./push/push-delivery.js";
import { LeaseCoordinator } from "./replicas/lease-coordinator.js";
import { type Resumable, resumableStreamsExtension } from "./replicas/resume.js";
import { createA2AServiceImpl } from "./services/a2a-service.js";
import { createSessionServiceImpl } from "./services/session-service.js";
import { createTargetServiceImpl } from "./services/target-service.js";
import { createThreadServiceImpl } from "./services/thread-service.js";

export interface Parley {
  readonly config: ParleyConfig;
  readonly engine: Engine;
  readonly store: ThreadStore;
  readonly logger: Logger;
  /** Registers every Parley service on a Connect router. */
  readonly routes: (router: ConnectRouter) => void;
  /** A Connect transport to every service in this process: no network hop, interceptors included. */
  inProcessTransport(): Transport;
  /** Starts the h2c listener (gRPC, Connect and gRPC-Web over HTTP/2); resolves to "host:port". */
  listen(): Promise<{ readonly address: string }>;
  /** The agent card of an agent (the default one when `agent` is omitted). */
  agentCard(options: AdvertisedEndpoints & { readonly agent?: string }): AgentCard;
  /** The hosted agents' names; the first is the default. */
  agentNames(): string[];
  /**
   * Graceful stop: refuses new sends, lets running tasks finish within
   * config.shutdownGraceMs (then fails them as interrupted), ends open
   * streams, closes the listener and the store.
   */
  close(): Promise<void>;
}

export interface CreateParleyOptions {
  readonly logger?: Logger;
}

export async function createParley(config: ParleyConfig, options: CreateParleyOptions = {}): Promise<Parley> {
  const logger = options.logger ?? createLogger(config.logLevel);
  // A postgres:// storeUrl makes this process one of N replicas sharing that database; else LevelDB in dataDir.
  const backend = await createStore({
    url: config.storeUrl !== "" ? config.storeUrl : config.dataDir,
    onError: (err) => logger.warn({ err }, "PostgreSQL connection trouble; reconnecting"),
  });
  const store = backend.store;
  let agents: Agent[];
  try {
    agents = createAgents(config.agents, config.peers, `parley@${config.host}:${config.port}`);
  } catch (error) {
    await backend.close();
    throw error;
  }
  // One LevelDB process owns its store alone: its in-process busy guard is all the coordination there is.
  const leases =
    backend.kind === "postgres"
      ? new LeaseCoordinator({
          store: backend.store,
          leases: backend.leases,
          events: backend.events,
          logger,
          ...config.scaleOut,
        })
      : undefined;
  const coordinator: ReplicaCoordinator = leases ?? createLocalCoordinator();
  const resumable: Resumable | undefined =
    leases && backend.kind === "postgres" ? { events: backend.events, coordinator: leases } : undefined;
  // Session steps reach agents through this guard so silence tokens and repeats are never stored.
  const agentsByName = new Map(agents.map((a) => [a.name, guardSessionSteps(a, config.sessions.silenceTokens)]));
  const push = config.capabilities.pushNotifications ? createPushConfigs({ store, config }) : undefined;
  // Without push the engine gets no listener at all, so publishing a task event costs nothing extra.
  const delivery: PushDelivery | undefined = push ? createPushDelivery({ configs: push, config, logger }) : undefined;
  const engine = new Engine({
    store,
    agents: agentsByName,
    config,
    logger,
    ...(delivery ? { onEvent: delivery.onEvent } : {}),
    coordinator,
  });
  // With replicas, another one may be running any unfinished task: expired leases are the sweeper's.
  if (coordinator.ownsUnfinishedTasks) await engine.recover();

  const names = agents.map((a) => a.name);
  let advertised: AdvertisedEndpoints = {};
  const agentCard = (opts: AdvertisedEndpoints & { readonly agent?: string } = {}, extended = false): AgentCard => {
    const name = opts.agent ?? names[0]!;
    const agent = agentsByName.get(name);
    if (!agent)
      throw new ConnectError(`no agent named ${JSON.stringify(name)}; hosted: ${names.join(", ")}`, Code.NotFound);
    if (opts.jsonRpcUrl !== undefined || opts.grpcAddress !== undefined) advertised = { ...advertised, ...opts };
    const card = buildAgentCard(config, agent, { ...advertised, ...opts }, { isDefault: name === names[0], extended });
    if (resumable) card.capabilities?.extensions.push(resumableStreamsExtension());
    return card;
  };

  const interceptors = [createCallerInterceptor(config, names)];
  // One instance for every router (listener and in-process), so they share the conversations.
  const sessionService = createSessionServiceImpl({
    engine,
    store,
    config,
    logger,
    agentNames: names,
    self: () => `parley@${advertised.grpcAddress ?? `${config.host}:${config.port}`}`,
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
        ...(resumable ? { resumable } : {}),
      }),
    },
    { service: ThreadService, impl: createThreadServiceImpl({ store, engine }) },
    { service: SessionService, impl: sessionService },
    { service: TargetService, impl: createTargetServiceImpl({ store, agents, peers: config.peers }) },
  ] as const;
  const routes = (router: ConnectRouter) => {
    for (const { service, impl } of services) router.service(service, impl as never);
  };
  const shutdown = new AbortController();
  // Every in-flight RPC listens on the shutdown signal; thousands of open streams are expected.
  setMaxListeners(0, shutdown.signal);
  const routerOptions = {
    interceptors,
    readMaxBytes: config.limits.maxMessageBytes,
    shutdownSignal: shutdown.signal,
  };

  let server: http2.Http2Server | undefined;
  const sessions = new Set<http2.ServerHttp2Session>();
  let closing: Promise<void> | undefined;

  const parley: Parley = {
    config,
    engine,
    store,
    logger,
    routes,
    inProcessTransport: () =>
      createDirectTransport(new Map(services.map((s) => [s.service.typeName, s])), interceptors, shutdown.signal),
    agentCard: (opts) => agentCard(opts),
    agentNames: () => [...names],
    async listen() {
      if (server) throw new Error("parley is already listening");
      const handler = connectNodeAdapter({
        routes,
        ...routerOptions,
        fallback(req, res) {
          if (req.url === "/healthz") {
            res.writeHead(200, { "content-type": "text/plain" });
            res.end("ok\n");
            return;
          }
          res.writeHead(404, { "content-type": "text/plain" });
          res.end(`no such RPC: ${req.url}\n`);
        },
      });
      const listener = http2.createServer({}, handler);
      listener.on("session", (session) => {
        sessions.add(session);
        session.once("close", () => sessions.delete(session));
      });
      await new Promise<void>((resolve, reject) => {
        listener.once("error", reject);
        listener.listen(config.port, config.host, () => {
          listener.off("error", reject);
          resolve();
        });
      });
      server = listener;
      const { port } = listener.address() as AddressInfo;
      const host = config.host.includes(":") ? `[${config.host}]` : config.host;
      const address = `${host}:${port}`;
      advertised = { ...advertised, grpcAddress: address };
      logger.info({ address }, "serving gRPC, Connect and gRPC-Web over h2c");
      return { address };
    },
    close() {
      closing ??= (async () => {
        await engine.shutdown(config.shutdownGraceMs);
        await delivery?.close();
        shutdown.abort(new ConnectError("the server is shutting down", Code.Unavailable));
        if (server) {
          const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
          for (const session of sessions) session.close();
          const timer = setTimeout(() => {
            for (const session of sessions) session.destroy();
          }, 1_000);
          await closed;
          clearTimeout(timer);
        }
        await coordinator.close();
        await backend.close();
        logger.info("stopped");
      })();
      return closing;
    },
  };
  return parley;
}
