export { type Bridge, type BridgeOptions, createBridge } from "./bridge.js";
export type { CardSource } from "./card-source.js";
export { JsonRpcCode, JsonRpcError, toJsonRpcError } from "./json-rpc-error.js";
export { type BridgeLimits, defaultLimits } from "./json-rpc-handler.js";
export { createBridgeLogger } from "./logger.js";
export { findMethod, type MethodSpec, type ProtocolVersion, supportedVersions } from "./methods.js";
export { createRemoteUpstream, type RemoteUpstream } from "./upstream.js";
