import { randomUUID } from "node:crypto";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  type ConverseEvent,
  type ConverseRequest,
  headers,
  Phase,
  type SessionRef,
  type SessionService,
} from "@parley/proto";
import type { ThreadStore } from "@parley/store";
import type { Logger } from "pino";
import { encodeChainReportTrailer } from "../chain/chain-budget.js";
import type { ChainGuard } from "../chain/chain-guard.js";
import type { ParleyConfig } from "../config.js";
import type { Engine } from "../engine/engine.js";
import { invalidArgument } from "../errors.js";
import { callerOf } from "../interceptors/caller-interceptor.js";
import { ConversationLog, ConversationRegistry } from "../sessions/conversation-log.js";
import { type ConversationPlan, ConversationRunner } from "../sessions/conversation-runner.js";
import { decodeHops, hopsHeader, resolveSession } from "../sessions/session-ref.js";
import { silenceTokenSet } from "../sessions/silence.js";

/** How many finished conversations stay readable by WatchConversation and GetConversation. */
export const finishedConversationCapacity = 1_000;

function refKey(ref: SessionRef | undefined): unknown {
  return ref ? [ref.endpoint.case ?? "", ref.endpoint.value ?? "", ref.contextId] : null;
}

function fingerprintOf(req: ConverseRequest): string {
  return JSON.stringify([refKey(req.requester), refKey(req.target), req.text, req.maxTurns ?? null]);
}

function nonNegative(value: number | undefined, field: string): void {
  if (value !== undefined && value < 0) throw invalidArgument(`${field} must not be negative, got ${value}`);
}

/**
 * parley.v1.SessionService: agent-to-agent conversations between two
 * sessions, streamed step by step. Conversations run independently of the
 * call that started them, so fire-and-forget callers and watchers all see
 * the same event log.
 */
export function createSessionServiceImpl(deps: {
  readonly engine: Engine;
  readonly store: ThreadStore;
  readonly config: ParleyConfig;
  readonly logger: Logger;
  readonly chains: ChainGuard;
  readonly agentNames: readonly string[];
  /** This server's identity in session ids, e.g. parley@127.0.0.1:8081 (known only once it listens). */
  readonly self: () => string;
}): ServiceImpl<typeof SessionService> {
  const { config } = deps;
  const registry = new ConversationRegistry(finishedConversationCapacity);
  const runner = new ConversationRunner({
    engine: deps.engine,
    store: deps.store,
    tokens: silenceTokenSet(config.sessions.silenceTokens),
    logger: deps.logger,
  });

  function start(
    tenant: string,
    req: ConverseRequest,
    hopHeader: string | null,
    chainHeader: string | null,
  ): ConversationLog {
    // A conversation started from inside an agent belongs to that agent's chain and draws from its budget.
    const chain = deps.chains.admitConversation(chainHeader);
    const sessions = { agentNames: deps.agentNames, peers: config.peers, self: deps.self() };
    const requester = resolveSession(req.requester, "requester", sessions);
    const target = resolveSession(req.target, "target", sessions);
    if (requester.id === target.id) {
      throw invalidArgument(
        `requester and target are the same session (${requester.id}); a session cannot converse with itself`,
      );
    }
    if (requester.kind === "local" && target.kind === "local" && requester.contextId === target.contextId) {
      // Threads are keyed by contextId alone, so two local agents on one contextId would share one thread.
      throw invalidArgument(
        `requester and target both use contextId ${JSON.stringify(target.contextId)}, which would make them one thread; give each session its own contextId`,
      );
    }
    const limits = config.sessions;
    const notes: string[] = [];
    let maxTurns = req.maxTurns ?? limits.defaultTurns;
    if (maxTurns > limits.maxTurns) {
      notes.push(`max_turns ${maxTurns} is above this server's limit and was clamped to ${limits.maxTurns}`);
      maxTurns = limits.maxTurns;
    }
    const stepLimit = config.limits.agentStepTimeoutMs;
    let stepTimeoutMs = req.stepTimeoutMs || stepLimit;
    if (stepTimeoutMs > stepLimit) {
      notes.push(`step_timeout_ms ${stepTimeoutMs} is above this server's limit and was clamped to ${stepLimit}`);
      stepTimeoutMs = stepLimit;
    }

    const incoming = decodeHops(hopHeader);
    const trace = incoming[incoming.length - 1] === requester.id ? incoming : [...incoming, requester.id];
    let hopViolation: string | undefined;
    if (incoming.length >= limits.maxHops) {
      hopViolation = `the request already passed through ${incoming.length} sessions (${incoming.join(" → ")}); the hop limit is ${limits.maxHops}`;
    } else if (trace.includes(target.id)) {
      hopViolation = `the target session ${target.id} already took part in this chain (${[...trace, target.id].join(" → ")}): a loop`;
    }

    const log = new ConversationLog(`conv-${randomUUID()}`, tenant, fingerprintOf(req), chain, {
      requester: requester.contextId,
      target: target.contextId,
    });
    log.append({
      phase: Phase.ACCEPTED,
      maxTurns,
      detail: [`${requester.id} → ${target.id}, up to ${maxTurns} ping-pong turns`, ...notes].join("; "),
    });
    registry.add(log, req.requestId);
    const plan: ConversationPlan = {
      log,
      tenant,
      requester,
      target,
      text: req.text,
      maxTurns,
      stepTimeoutMs,
      stepBudget: limits.stepBudget,
      trace,
      chain,
      ...(hopViolation !== undefined ? { hopViolation } : {}),
    };
    void runner.run(plan).finally(() => registry.retire(log));
    return log;
  }

  function find(ctx: HandlerContext, id: string): ConversationLog {
    if (id === "") throw invalidArgument("conversation_id is required");
    const log = registry.get(callerOf(ctx).tenant, id);
    if (!log) {
      throw new ConnectError(
        `no conversation ${JSON.stringify(id)}: it never existed for this tenant or was one of the oldest beyond the last ${finishedConversationCapacity} finished`,
        Code.NotFound,
      );
    }
    return log;
  }

  async function* stream(log: ConversationLog, waitMs: number | undefined, ctx: HandlerContext) {
    if (waitMs === 0) {
      yield { event: log.events[0]! };
      return;
    }
    const signal = waitMs === undefined ? ctx.signal : AbortSignal.any([ctx.signal, AbortSignal.timeout(waitMs)]);
    for await (const event of log.follow(signal)) yield { event };
  }

  return {
    async *converse(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      if (req.text.trim() === "") throw invalidArgument("text must not be empty");
      nonNegative(req.maxTurns, "max_turns");
      nonNegative(req.waitMs, "wait_ms");
      nonNegative(req.stepTimeoutMs, "step_timeout_ms");
      let log = req.requestId !== "" ? registry.byRequestId(tenant, req.requestId) : undefined;
      if (log && log.fingerprint !== fingerprintOf(req)) {
        throw invalidArgument(
          `request_id ${JSON.stringify(req.requestId)} was already used for a different request (conversation ${log.id}); choose a new request_id`,
        );
      }
      log ??= start(tenant, req, ctx.requestHeader.get(hopsHeader), ctx.requestHeader.get(headers.chain));
      yield* stream(log, req.waitMs, ctx);
      // Only a finished conversation reports its chain's budget: the caller charges what it used.
      if (log.finished) ctx.responseTrailer.set(headers.chain, encodeChainReportTrailer(log.chain));
    },
    async *watchConversation(req, ctx) {
      const log = find(ctx, req.conversationId);
      for await (const event of log.follow(ctx.signal)) yield { event };
    },
    async getConversation(req, ctx) {
      const log = find(ctx, req.conversationId);
      return { conversation: { conversationId: log.id, state: log.state, events: [...log.events] as ConverseEvent[] } };
    },
  };
}
