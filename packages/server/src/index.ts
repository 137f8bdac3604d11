export { type AdvertisedEndpoints, buildAgentCard } from "./agent-card.js";
export { createA2APeerAgent } from "./agents/a2a-peer-agent.js";
export { type Agent, type AgentEvent, type AgentTurn, sleep } from "./agents/agent.js";
export {
  type ConformanceAgentOptions,
  conformancePrefixOf,
  createConformanceAgent,
} from "./agents/conformance-agent.js";
export { createAgents } from "./agents/create-agents.js";
export { createEchoAgent, type EchoAgentOptions } from "./agents/echo-agent.js";
export {
  createForwardBudget,
  defaultForwardBudget,
  type ForwardBudget,
  type ForwardBudgetOptions,
} from "./agents/forward-budget.js";
export { createOpenAIAgent, type OpenAIAgentOptions } from "./agents/openai-agent.js";
export { createScriptAgent, parseScript, type ScriptConverse, type ScriptEntry } from "./agents/script-agent.js";
export { guardSessionSteps, stepOutcomeArtifactId } from "./agents/step-guard.js";
export { type ChainHand, ChainLedger } from "./chain/chain-budget.js";
export { type ChainContext, type ChainHop, type ChainLimits, decodeChain, encodeChain } from "./chain/chain-context.js";
export { type ChainGuard, createChainGuard } from "./chain/chain-guard.js";
export { ChainRefusedError, chainRefusalReasons } from "./chain/chain-refusal.js";
export {
  type AgentConfig,
  agentShortcuts,
  ConfigError,
  type ConfigProblem,
  configHelp,
  defaultConfig,
  type LoadConfigOptions,
  type LoadedConfig,
  loadConfig,
  type ParleyConfig,
  type PeerConfig,
  type Program,
  parleyConfigSchema,
  renderConfigTable,
  renderHelp,
  type SettingInfo,
  type SettingMeta,
  settingList,
  settings,
} from "./config.js";
export type { Caller } from "./engine/caller.js";
export { Engine, type EngineOptions, type SendOptions, type SendOutcome } from "./engine/engine.js";
export { formatHistory, type HistoryEntry, messageText } from "./engine/history.js";
export { hopsOf, parleyMetadataKey } from "./engine/parley-metadata.js";
export type { ReplicaCoordinator } from "./engine/replica-coordinator.js";
export { type TaskEventSource, TaskRun } from "./engine/task-run.js";
export {
  contextBusy,
  createTypedError,
  type ErrorReason,
  errorReasonOf,
  errorReasons,
  storeFailure,
  taskNotFound,
} from "./errors.js";
export {
  type CheckResult,
  createHealthMonitor,
  type HealthMonitor,
  type HealthMonitorOptions,
  type Readiness,
  type ReadinessProbe,
} from "./health/health-monitor.js";
export { createHealthServiceImpl } from "./health/health-service.js";
export { agentHeader, openModeTenant, supportedA2AVersions, tenantIn } from "./interceptors/caller-interceptor.js";
export {
  classifyDecodeError,
  classifyDecodeErrors,
  createDecodeErrorInterceptor,
  createStrictTextDecoder,
} from "./interceptors/decode-errors.js";
export { clientAddressKey } from "./limits/auth-throttle.js";
export { keyedRequestsPerSecondPerTenant, type RateLimitPolicy, rateLimitPolicy } from "./limits/rate-limit-policy.js";
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
export {
  createHttpFront,
  type HttpFrontOptions,
  type NodeRequest,
  type NodeResponse,
  noteRequest,
  requestIdOf,
  trackHttpRequests,
} from "./listen/http-front.js";
export { type BodyReaderOptions, createBodyReader, type ReadBody, readBodyOf } from "./listen/request-body.js";
export { refuseRpc } from "./listen/rpc-refusal.js";
export {
  readTlsFiles,
  reloadTlsOnChange,
  type TlsFiles,
  type TlsReloadLog,
  tlsEnabled,
  tlsServerOptions,
} from "./listen/tls-files.js";
export { createLogger, type Logger } from "./logger.js";
export { instrumentAgent, instrumentStore } from "./observability/instrument.js";
export {
  createParleyMetrics,
  type ParleyMetrics,
  type PushOutcome,
  type RequestProtocol,
} from "./observability/metrics.js";
export { createObservability, type Observability } from "./observability/observability.js";
export { defaultOperationsOptions, type OperationsOptions } from "./observability/operations-options.js";
export { createRequestLog, type FinishedRequest, type RequestLog } from "./observability/request-log.js";
export { codeName, createObservingInterceptor } from "./observability/rpc-interceptor.js";
export {
  extractTraceContext,
  injectTraceHeaders,
  otlpProtocols,
  startTracing,
  stopTracing,
  type TracingPipeline,
  type TracingSettings,
  tracingActive,
  tracingSettingsFromEnv,
} from "./observability/tracing.js";
export { type CreateParleyOptions, createParley, type Parley } from "./parley.js";
export { createPushAddressPolicy, type PushAddressPolicy } from "./push/push-address-policy.js";
export { createPushConfigs, type PushConfigs, pushDestinationRules } from "./push/push-configs.js";
export { createPushDelivery, type PushDelivery, pushContentType, pushTokenHeader } from "./push/push-delivery.js";
export { checkPushUrl, pushHostOf, resolvePushDestination } from "./push/push-destination.js";
export { createReflectionServices, type ReflectionServices } from "./reflection/reflection-service.js";
export { endsRun, LeaseCoordinator, type LeaseCoordinatorOptions } from "./replicas/lease-coordinator.js";
export { resumableStreamsExtension } from "./replicas/resume.js";
export { createSessionServiceImpl, finishedConversationCapacity } from "./services/session-service.js";
export { peerAgentName, threadTargetPrefix } from "./services/target-service.js";
export { type ConversationPlan, ConversationRunner } from "./sessions/conversation-runner.js";
export { decodeHops, encodeHops, hopsHeader, resolvePeer } from "./sessions/session-ref.js";
export { parseSessionSpec } from "./sessions/session-spec.js";
export { type SessionStep, sessionStepOf, stepInstructions } from "./sessions/session-step.js";
export {
  announceSkipToken,
  foldReply,
  isOnlyToken,
  isSilentReply,
  replyDigest,
  replySkipToken,
  silenceTokenSet,
  tokenKey,
  trailingTokenAt,
} from "./sessions/silence.js";
export { exitOnSignals } from "./shutdown.js";
export { openModeWarning, startNotices, storeNotice } from "./start-notices.js";
