// Parley's serving layer: RPC routes with connect-node as the fallback, the dual-protocol listener, the body
// reader, connection limits, TLS files, CORS, decode-error handling and call contexts. No domain code.
export { type CallContextInit, clientAddressKey, createCallContext, onAbort } from "./call-context.js";
export { createDirectTransport } from "./direct-transport.js";
export { percentEncodeGrpcMessage } from "./grpc-status.js";
export {
  classifyDecodeErrors,
  createDecodeErrorInterceptor,
  createStrictTextDecoder,
} from "./interceptors/decode-errors.js";
export { createConnectRoute } from "./listen/connect-route.js";
export {
  type ConnectionLimits,
  defaultConnectionLimits,
  http1ServerOptions,
  limitConnections,
  rpcFramingBytes,
} from "./listen/connection-limits.js";
export { type Cors, type CorsVerdict, createCors, parseCorsOrigin } from "./listen/cors.js";
export {
  createDualProtocolServer,
  type DualProtocolHandler,
  type DualProtocolServer,
  type DualProtocolServerOptions,
} from "./listen/dual-protocol-server.js";
export { createGrpcRoute } from "./listen/grpc-route.js";
export { type NodeRequest, type NodeResponse, requestIdOf, writeHead } from "./listen/node-http.js";
export { type BodyReaderOptions, createBodyReader, type ReadBody, readBodyOf } from "./listen/request-body.js";
export { createRpcHandler, type RpcHandlerOptions, streamingRequestPaths } from "./listen/rpc-handler.js";
export { refuseRpc } from "./listen/rpc-refusal.js";
export {
  readTlsFiles,
  reloadTlsOnChange,
  type TlsFiles,
  type TlsReloadLog,
  tlsEnabled,
  tlsServerOptions,
} from "./listen/tls-files.js";
export { createServiceCalls, type ServiceCalls } from "./service-calls.js";
