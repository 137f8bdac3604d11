export { type ChainHandOut, type ChainSource, createChainInterceptor } from "./chain-interceptor.js";
export {
  a2aVersion,
  createParleyClient,
  type HttpVersion,
  httpVersions,
  type ParleyClient,
  type ParleyClientOptions,
  type ParleyProtocol,
  parleyProtocols,
} from "./client.js";
export {
  type ClientConfig,
  type CliProtocol,
  ConfigError,
  cliProtocols,
  defaultConfigPath,
  defaultServer,
  type LoadClientConfigOptions,
  loadClientConfig,
  type PeerEntry,
  type PeerProtocol,
  peerProtocols,
} from "./config.js";
export {
  type Conversation,
  type ConversationBackend,
  type ConversationEvent,
  type ConversationOptions,
  createConversation,
  partsText,
  type Reply,
  type SendOptions,
  TaskFailedError,
  taskStateName,
  taskText,
} from "./conversation.js";
export { ExitCode, exitCodeOf, UsageError } from "./errors.js";
export { type A2ASender, createJsonRpcA2AClient, type JsonRpcClientOptions } from "./json-rpc-client.js";
export { createRestA2AClient, type RestA2AClient, type RestClientOptions } from "./rest-client.js";
export {
  agentPrefix,
  configuredPeers,
  formatKnownTargets,
  type KnownTarget,
  listTargets,
  type ParsedTarget,
  parseTarget,
  peerPrefix,
  type ResolvedTarget,
  resolveTarget,
  type TargetListing,
  TargetNotFoundError,
  threadPrefix,
} from "./targets.js";
