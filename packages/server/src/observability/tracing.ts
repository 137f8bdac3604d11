import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  trace,
} from "@opentelemetry/api";
import { batchOptionsFromEnv, samplerFromEnv } from "./trace-env.js";

type Env = Readonly<Record<string, string | undefined>>;

/** The OTLP encodings Parley can export with (OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL). */
export const otlpProtocols = ["http/protobuf", "http/json"] as const;

export interface TracingSettings {
  readonly protocol: (typeof otlpProtocols)[number];
}

/**
 * Reads the standard OpenTelemetry variables: tracing is on only when an OTLP
 * endpoint is given (OTEL_EXPORTER_OTLP_ENDPOINT or ..._TRACES_ENDPOINT) or
 * OTEL_TRACES_EXPORTER=otlp, and OTEL_SDK_DISABLED is not true. Anything it
 * cannot honour is an error that names the variable.
 */
export function tracingSettingsFromEnv(env: Env = process.env): TracingSettings | undefined {
  if (/^true$/i.test(env.OTEL_SDK_DISABLED?.trim() ?? "")) return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = exporters.filter((e) => e !== "otlp" && e !== "none");
  if (unknown.length > 0) {
    throw new Error(`OTEL_TRACES_EXPORTER must be otlp or none, got ${JSON.stringify(env.OTEL_TRACES_EXPORTER)}`);
  }
  if (exporters.includes("none")) return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint && !exporters.includes("otlp")) return undefined;
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = (env[variable] || "http/protobuf").trim();
  if (!(otlpProtocols as readonly string[]).includes(protocol)) {
    throw new Error(
      `${variable} must be one of ${otlpProtocols.join(", ")} (OTLP over HTTP), got ${JSON.stringify(protocol)}`,
    );
  }
  return { protocol: protocol as TracingSettings["protocol"] };
}

/** A started tracing pipeline; flushes and stops on shutdown. */
export interface TracingPipeline {
  shutdown(): Promise<void>;
}

let pipeline: Promise<TracingPipeline | undefined> | undefined;
/** Read on every hot-path call: false means no span, no propagation, no allocation. */
let active = false;

/** Whether spans are being recorded in this process. */
export function tracingActive(): boolean {
  return active;
}

/**
 * Starts OpenTelemetry once per process when the OTEL_* variables ask for it,
 * and does nothing otherwise: the SDK is not even loaded then. `serviceName`
 * is the default of OTEL_SERVICE_NAME. The server and an embedded bridge share
 * one pipeline, so a process exports one trace per request.
 */
export function startTracing(serviceName: string, env: Env = process.env): Promise<TracingPipeline | undefined> {
  pipeline ??= (async () => {
    const settings = tracingSettingsFromEnv(env);
    if (!settings) return undefined;
    const [sdk, { AsyncLocalStorageContextManager }, core, resources, exporters] = await Promise.all([
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/core"),
      import("@opentelemetry/resources"),
      settings.protocol === "http/json"
        ? import("@opentelemetry/exporter-trace-otlp-http")
        : import("@opentelemetry/exporter-trace-otlp-proto"),
    ]);
    // The exporter reads its endpoint, headers and timeout from the standard OTEL_* variables; Parley reads the
    // sampler's and the batch processor's (trace-env.ts).
    const resource = resources
      .defaultResource()
      .merge(resources.resourceFromAttributes({ "service.name": serviceName }))
      .merge(resources.detectResources({ detectors: [resources.envDetector] }));
    const provider = new sdk.TracerProvider({
      resource,
      sampler: samplerFromEnv(env, sdk),
      spanProcessors: [
        new sdk.BatchSpanProcessor({ exporter: new exporters.OTLPTraceExporter(), ...batchOptionsFromEnv(env) }),
      ],
    });
    // What SDK 2's NodeTracerProvider.register() did: the provider, an AsyncLocalStorage context manager (spans
    // follow async calls) and W3C trace context plus baggage propagation, all global.
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(
      new core.CompositePropagator({
        propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
      }),
    );
    active = true;
    return {
      async shutdown() {
        active = false;
        await provider.shutdown();
      },
    };
  })();
  return pipeline;
}

/** Flushes and stops the process's pipeline, if one was started. */
export async function stopTracing(): Promise<void> {
  const started = await pipeline;
  pipeline = undefined;
  await started?.shutdown();
}

/** The tracer every Parley span comes from. */
export function parleyTracer() {
  return trace.getTracer("parley");
}

/** Reads traceparent / tracestate from a Fetch Headers object or Node's header record. */
const headerGetter: TextMapGetter<Headers | Readonly<Record<string, string | string[] | undefined>>> = {
  keys: (carrier) => (carrier instanceof Headers ? [...carrier.keys()] : Object.keys(carrier)),
  get(carrier, key) {
    if (carrier instanceof Headers) return carrier.get(key) ?? undefined;
    return carrier[key];
  },
};

const headerSetter: TextMapSetter<Headers | Record<string, string>> = {
  set(carrier, key, value) {
    if (carrier instanceof Headers) carrier.set(key, value);
    else carrier[key] = value;
  },
};

/** The remote parent a request's W3C traceparent / tracestate headers name (the root context without them). */
export function extractTraceContext(
  headers: Headers | Readonly<Record<string, string | string[] | undefined>>,
): Context {
  return propagation.extract(ROOT_CONTEXT, headers, headerGetter);
}

/**
 * Adds traceparent / tracestate of the current span to the headers of an
 * outgoing call (peer agents, session steps, push deliveries, model calls),
 * so the next hop's spans join this trace. Returns the same object; a no-op
 * while tracing is off.
 */
export function injectTraceHeaders<T extends Headers | Record<string, string>>(headers: T): T {
  if (active) propagation.inject(context.active(), headers, headerSetter);
  return headers;
}

/** Ends a span with an error status that carries the failure's message. */
export function failSpan(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/**
 * Runs `work` inside a new internal span (a child of the current one) and ends
 * the span when the promise settles. Callers check tracingActive() first, so
 * a disabled tracer costs one boolean test.
 */
export async function inSpan<T>(name: string, attributes: Attributes, work: () => Promise<T>): Promise<T> {
  const span = parleyTracer().startSpan(name, { kind: SpanKind.INTERNAL, attributes });
  try {
    return await context.with(trace.setSpan(context.active(), span), work);
  } catch (error) {
    failSpan(span, error);
    throw error;
  } finally {
    span.end();
  }
}

export { context as otelContext, SpanKind, trace as otelTrace };
