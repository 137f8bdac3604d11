import type { DescMethod, DescMethodStreaming, DescMethodUnary } from "@bufbuild/protobuf";
import {
  type ContextValues,
  createContextValues,
  type Interceptor,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import { type CallableServices, type CallInit, createServiceCalls, neverAborted } from "./service-calls.js";

/** The service implementations a direct transport calls, by service type name. */
export type DirectServices = CallableServices;

/**
 * A Connect transport that calls the service implementations of this process
 * directly: the same interceptors and handler contexts as over the network,
 * but no serialisation, no framing and no HTTP. The embedded bridge uses it so
 * a JSON-RPC request is parsed once (JSON to protobuf) and its reply encoded
 * once (protobuf to JSON).
 */
export function createDirectTransport(
  services: DirectServices,
  interceptors: readonly Interceptor[],
  shutdownSignal?: AbortSignal,
): Transport {
  const calls = createServiceCalls(services, interceptors, shutdownSignal);
  const callOf = (
    method: DescMethodUnary | DescMethodStreaming,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0],
    contextValues: ContextValues | undefined,
  ): CallInit => ({
    method,
    protocolName: "in-process",
    url: urlOf(method),
    header: new Headers(header),
    contextValues: contextValues ?? createContextValues(),
    signal: signal ?? neverAborted,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  });
  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const call = callOf(method, signal, timeoutMs, header, contextValues);
      return (await calls.unary(call, input)) as UnaryResponse<never, never>;
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const call = callOf(method, signal, timeoutMs, header, contextValues);
      return (await calls.stream(call, input)) as StreamResponse<never, never>;
    },
  };
}

const urls = new WeakMap<DescMethod, string>();

/** The call's URL, made once per method. */
function urlOf(method: DescMethodUnary | DescMethodStreaming): string {
  let url = urls.get(method);
  if (url === undefined) {
    url = `in-process:///${method.parent.typeName}/${method.name}`;
    urls.set(method, url);
  }
  return url;
}
