// For embedding Parley's conversation domain. Parts for Parley's own packages: "@parley/domain/internal".
export { type Agent, type AgentEvent, type AgentTurn, sleep } from "./agent/agent.js";
export { ChainLedger } from "./chain/chain-budget.js";
export { type ChainGuard, createChainGuard } from "./chain/chain-guard.js";
export { ChainRefusedError, chainRefusalReasons } from "./chain/chain-refusal.js";
export type { Caller } from "./engine/caller.js";
export { Engine, type EngineOptions, type SendOptions, type SendOutcome } from "./engine/engine.js";
export type { EngineConfig, MessageLimits } from "./engine/engine-config.js";
export type { ReplicaCoordinator } from "./engine/replica-coordinator.js";
export { type TaskEventSource, TaskRun } from "./engine/task-run.js";
export {
  contextBusy,
  createTypedError,
  type ErrorReason,
  errorReasonOf,
  errorReasons,
  invalidArgument,
  storeFailure,
  taskNotFound,
} from "./errors.js";
export { LeaseCoordinator, type LeaseCoordinatorOptions } from "./replicas/lease-coordinator.js";
export { resumableStreamsExtension } from "./replicas/resume.js";
export { type ConversationPlan, ConversationRunner } from "./sessions/conversation-runner.js";
export type { CallPeer, PeerAnswer, SessionPeer } from "./sessions/session-peer.js";
export { type ResolvedSession, resolveSession } from "./sessions/session-ref.js";
export { parseSessionSpec } from "./sessions/session-spec.js";
export { announceSkipToken, replySkipToken, silenceTokenSet } from "./sessions/silence.js";
export { formatHistory, type HistoryEntry, messageText } from "./thread/history.js";
export { hopsOf, parleyMetadataKey } from "./thread/parley-metadata.js";
