// For Parley's own packages and apps, not a stable interface: names here may change with any release.
export { turnStopReason } from "./agent/agent.js";
export { type ChainHand, chainReportFromTrailer, encodeChainReportTrailer } from "./chain/chain-budget.js";
export { chainRefusalOf, isChainRefusalReason } from "./chain/chain-refusal.js";
export { createForwardBudget, defaultForwardBudget, type ForwardBudgetOptions } from "./chain/forward-budget.js";
export { resolveServerId } from "./chain/server-id.js";
export { deadlinePassed, fromStore, withoutDatabaseText } from "./errors.js";
export { endsRun } from "./replicas/lease-coordinator.js";
export { type Resumable, subscribeFromLog } from "./replicas/resume.js";
export { ConversationLog, ConversationRegistry } from "./sessions/conversation-log.js";
export {
  createConversationRecorder,
  loadConversation,
  readStoredEvents,
  recoverConversations,
  summaryOfRecord,
} from "./sessions/conversation-records.js";
export { decodeHops, encodeHops, hopsHeader, resolvePeer } from "./sessions/session-ref.js";
export { isOnlyToken, isSilentReply, tokenKey, trailingTokenAt } from "./sessions/silence.js";
export { guardSilence } from "./sessions/silence-guard.js";
export { createSilentRequestCheck } from "./sessions/silent-request.js";
export { guardSessionSteps } from "./sessions/step-guard.js";
