import { performance } from "node:perf_hooks";
import { type Context, context, type Span, SpanKind, trace } from "@opentelemetry/api";
import type { Agent, AgentEvent, AgentTurn } from "@parley/domain";
import { turnStopReason } from "@parley/domain/internal";
import type { ParleyMetrics } from "./metrics.js";
import { failSpan, parleyTracer, tracingActive } from "./tracing.js";
import { watchIterable } from "./watch-iterable.js";

/**
 * The store with every asynchronous method timed (parley_store_operation_duration_seconds,
 * labelled by method name) and, with tracing on, wrapped in a "store.<method>"
 * span. Methods are wrapped once, on first use, and called on the real store.
 */
export function instrumentStore<T extends object>(store: T, metrics: ParleyMetrics | undefined): T {
  if (!metrics && !tracingActive()) return store;
  const wrapped = new Map<PropertyKey, unknown>();
  const wrap = (name: string, method: (...args: unknown[]) => unknown) =>
    function (this: unknown, ...args: unknown[]): unknown {
      const start = performance.now();
      let span: Span | undefined;
      let result: unknown;
      if (tracingActive()) {
        span = parleyTracer().startSpan(`store.${name}`, { kind: SpanKind.INTERNAL });
        result = context.with(trace.setSpan(context.active(), span), () => method.apply(store, args));
      } else {
        result = method.apply(store, args);
      }
      if (!(result instanceof Promise)) {
        span?.end();
        return result;
      }
      return result.then(
        (value) => {
          metrics?.storeOperation(name, "ok", (performance.now() - start) / 1000);
          span?.end();
          return value;
        },
        (error: unknown) => {
          metrics?.storeOperation(name, "error", (performance.now() - start) / 1000);
          if (span) {
            failSpan(span, error);
            span.end();
          }
          throw error;
        },
      );
    };
  return new Proxy(store, {
    get(target, property, receiver) {
      const cached = wrapped.get(property);
      if (cached !== undefined) return cached;
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string" || property === "close") return value;
      const fn = wrap(property, value as (...args: unknown[]) => unknown);
      wrapped.set(property, fn);
      return fn;
    },
  });
}

/**
 * The agent with each step (one run, from the first to the last event) timed
 * by agent name and outcome and, with tracing on, inside an "agent.step"
 * span: everything the agent does, its outgoing calls included, runs in that
 * span, so their traceparent names it.
 */
export function instrumentAgent(agent: Agent, metrics: ParleyMetrics | undefined): Agent {
  if (!metrics && !tracingActive()) return agent;
  return {
    name: agent.name,
    description: agent.description,
    run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const start = performance.now();
      let span: Span | undefined;
      let spanContext: Context | undefined;
      if (tracingActive()) {
        span = parleyTracer().startSpan("agent.step", {
          kind: SpanKind.INTERNAL,
          attributes: { "parley.agent": agent.name, "parley.streaming": turn.streaming },
        });
        spanContext = trace.setSpan(context.active(), span);
      }
      return watchIterable(
        () => agent.run(turn)[Symbol.asyncIterator](),
        (error) => {
          metrics?.agentStep(agent.name, error === undefined ? "ok" : "error", (performance.now() - start) / 1000);
          if (span) {
            if (error !== undefined) failSpan(span, error);
            span.end();
          }
        },
        // The engine stops reading when the turn is aborted (cancel, timeout, shutdown) and when it is done.
        {
          ...(spanContext ? { spanContext } : {}),
          abandoned: () => turnStopReason(turn),
        },
      );
    },
  };
}

/** Runs one engine turn (the agent's run and the reply's append) inside a "parley.turn" span. */
export function traceTurn<T>(agent: string, taskId: string, work: () => Promise<T>): Promise<T> {
  const span = parleyTracer().startSpan("parley.turn", {
    kind: SpanKind.INTERNAL,
    attributes: { "parley.agent": agent, "parley.task_id": taskId },
  });
  return context.with(trace.setSpan(context.active(), span), work).then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      failSpan(span, error);
      span.end();
      throw error;
    },
  );
}
