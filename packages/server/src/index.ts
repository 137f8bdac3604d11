// Parley's server: createParley composes the domain (@parley/domain) and the serving layer (@parley/serving)
// from a ParleyConfig; the config, health and observability parts are for apps that front it, like the bridge.
export { type AdvertisedEndpoints, buildAgentCard } from "./agent-card.js";
export { createA2APeerAgent } from "./agents/a2a-peer-agent.js";
export { type ConformanceAgentOptions, createConformanceAgent } from "./agents/conformance-agent.js";
export { createEchoAgent, type EchoAgentOptions } from "./agents/echo-agent.js";
export { createOpenAIAgent, type OpenAIAgentOptions } from "./agents/openai-agent.js";
export { createScriptAgent } from "./agents/script-agent.js";
export {
  type AgentConfig,
  ConfigError,
  type ConfigProblem,
  configHelp,
  defaultConfig,
  type LoadConfigOptions,
  type LoadedConfig,
  loadConfig,
  type ParleyConfig,
  type PeerConfig,
  renderConfigTable,
  renderHelp,
  type SettingInfo,
  settingList,
} from "./config.js";
export { createAgents } from "./create-agents.js";
export {
  createHealthMonitor,
  type HealthMonitor,
  type HealthMonitorOptions,
  type Readiness,
} from "./health/health-monitor.js";
export { openModeTenant } from "./interceptors/caller-interceptor.js";
export { createLogger, type Logger } from "./logger.js";
export { createHttpFront, noteRequest, trackHttpRequests } from "./observability/http-front.js";
export { createObservability, type Observability } from "./observability/observability.js";
export { codeName } from "./observability/rpc-interceptor.js";
export { injectTraceHeaders, startTracing, stopTracing, type TracingPipeline } from "./observability/tracing.js";
export { type CreateParleyOptions, createParley, type Parley } from "./parley.js";
export { exitOnSignals } from "./shutdown.js";
export { startNotices } from "./start-notices.js";
