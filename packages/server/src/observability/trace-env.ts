import type { BatchSpanProcessorOptions, Sampler } from "@opentelemetry/sdk-trace";

type Env = Readonly<Record<string, string | undefined>>;
type SdkTrace = typeof import("@opentelemetry/sdk-trace");

/**
 * The sampler the standard OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG variables name (default
 * parentbased_always_on). OpenTelemetry's SDK 2 read them itself; SDK 3 leaves it to the caller.
 */
export function samplerFromEnv(env: Env, sdk: SdkTrace): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? "").trim().toLowerCase() || "parentbased_always_on";
  const ratio = () => {
    const raw = env.OTEL_TRACES_SAMPLER_ARG?.trim();
    if (raw === undefined || raw === "") return 1;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      throw new Error(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got ${JSON.stringify(raw)}`);
    }
    return value;
  };
  const root: Record<string, () => Sampler> = {
    always_on: () => new sdk.AlwaysOnSampler(),
    always_off: () => new sdk.AlwaysOffSampler(),
    traceidratio: () => new sdk.TraceIdRatioBasedSampler(ratio()),
  };
  const plain = root[name];
  if (plain) return plain();
  const parented = name.startsWith("parentbased_") ? root[name.slice("parentbased_".length)] : undefined;
  if (parented) return new sdk.ParentBasedSampler({ root: parented() });
  const known = [...Object.keys(root), ...Object.keys(root).map((n) => `parentbased_${n}`)].join(", ");
  throw new Error(`OTEL_TRACES_SAMPLER must be one of ${known}, got ${JSON.stringify(env.OTEL_TRACES_SAMPLER)}`);
}

const batchVariables = {
  scheduledDelayMillis: "OTEL_BSP_SCHEDULE_DELAY",
  exportTimeoutMillis: "OTEL_BSP_EXPORT_TIMEOUT",
  maxQueueSize: "OTEL_BSP_MAX_QUEUE_SIZE",
  maxExportBatchSize: "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
} as const;

/** The batch span processor's settings from the standard OTEL_BSP_* variables; unset ones keep the SDK's defaults. */
export function batchOptionsFromEnv(env: Env): Omit<BatchSpanProcessorOptions, "exporter"> {
  const options: { -readonly [K in keyof typeof batchVariables]?: number } = {};
  for (const [key, variable] of Object.entries(batchVariables) as [keyof typeof batchVariables, string][]) {
    const raw = env[variable]?.trim();
    if (raw === undefined || raw === "") continue;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < (key === "scheduledDelayMillis" ? 0 : 1)) {
      throw new Error(
        `${variable} must be a whole number${key === "scheduledDelayMillis" ? "" : " above 0"}, got ${JSON.stringify(raw)}`,
      );
    }
    options[key] = value;
  }
  return options;
}
