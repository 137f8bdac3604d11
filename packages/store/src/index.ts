// The ThreadStore contract and createStore. Leases, fenced writes, task event logs and the backends' own
// constructors, for replica coordination and tools: "@parley/store/backends".
export * from "./conversation-types.js";
export { threadDigest } from "./core/digests.js";
export { type CreateStoreOptions, createStore, isPostgresUrl } from "./create-store.js";
export {
  DEFAULT_WRITE_BUFFER_BYTES,
  type LevelThreadStore,
  MAX_WRITE_BUFFER_BYTES,
  MIN_WRITE_BUFFER_BYTES,
} from "./level/level-thread-store.js";
export type { PostgresBackend } from "./postgres/pg-backend.js";
export { isDatabaseError, isDatabaseUnavailable } from "./postgres/pg-errors.js";
export type { CommitStats, LevelBackend, ReplicaBackend, StoreBackend, StoreHealth } from "./replica-types.js";
export * from "./types.js";
