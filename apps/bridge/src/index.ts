export {
  type Bridge,
  type BridgeLimits,
  type BridgeOptions,
  type CardSource,
  createBridge,
  defaultLimits,
} from "./bridge.js";
export { JsonRpcCode, JsonRpcError, toJsonRpcError } from "./json-rpc-error.js";
export { createBridgeLogger } from "./logger.js";
export { findMethod, type MethodSpec, type ProtocolVersion, supportedVersions } from "./methods.js";
export { createRemoteUpstream, type RemoteUpstream } from "./upstream.js";
