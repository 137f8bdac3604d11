import { ROOT_CONTEXT, SpanKind } from "@opentelemetry/api";
import * as sdk from "@opentelemetry/sdk-trace";
import { describe, expect, it } from "vitest";
import { batchOptionsFromEnv, samplerFromEnv } from "../src/observability/trace-env.js";

const decision = (sampler: sdk.Sampler, traceId: string) =>
  sampler.shouldSample(ROOT_CONTEXT, traceId, "span", SpanKind.SERVER, {}, []).decision;

describe("the standard OTEL_* sampler and batch variables, read by Parley for OpenTelemetry SDK 3", () => {
  it("defaults to parentbased_always_on and honours each sampler name and its ratio", () => {
    expect(samplerFromEnv({}, sdk).toString()).toMatch(/^ParentBased\{root=AlwaysOnSampler/);
    expect(decision(samplerFromEnv({ OTEL_TRACES_SAMPLER: "always_off" }, sdk), "a".repeat(32))).toBe(
      sdk.SamplingDecision.NOT_RECORD,
    );
    expect(decision(samplerFromEnv({ OTEL_TRACES_SAMPLER: "ALWAYS_ON" }, sdk), "a".repeat(32))).toBe(
      sdk.SamplingDecision.RECORD_AND_SAMPLED,
    );
    const ratio = samplerFromEnv(
      { OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25" },
      sdk,
    );
    expect(ratio.toString()).toContain("TraceIdRatioBased{0.25}");
  });

  it("refuses a sampler or a ratio it does not know, naming the variable and the value", () => {
    expect(() => samplerFromEnv({ OTEL_TRACES_SAMPLER: "jaeger_remote" }, sdk)).toThrow(
      /OTEL_TRACES_SAMPLER must be one of .*parentbased_traceidratio, got "jaeger_remote"/,
    );
    expect(() => samplerFromEnv({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "2" }, sdk)).toThrow(
      'OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got "2"',
    );
  });

  it("passes the OTEL_BSP_* settings that are set and refuses ones that are not whole numbers", () => {
    expect(batchOptionsFromEnv({})).toEqual({});
    expect(
      batchOptionsFromEnv({
        OTEL_BSP_SCHEDULE_DELAY: "0",
        OTEL_BSP_MAX_QUEUE_SIZE: "100",
        OTEL_BSP_EXPORT_TIMEOUT: "",
      }),
    ).toEqual({ scheduledDelayMillis: 0, maxQueueSize: 100 });
    expect(() => batchOptionsFromEnv({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "0" })).toThrow(
      'OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be a whole number above 0, got "0"',
    );
  });
});
