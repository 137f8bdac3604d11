// For replica coordination and tools: leases, fenced writes, task event logs, and the backends' constructors.
export { createLevelThreadStore, type LevelThreadStoreOptions } from "./level/level-thread-store.js";
export { type Migration, migrate, migrations } from "./postgres/migrations.js";
export { createPostgresBackend, type PostgresBackendOptions } from "./postgres/pg-backend.js";
export type {
  AppendEventsOptions,
  AppendEventsResult,
  ContextLeases,
  ExpiredLease,
  Fence,
  FencedThreadStore,
  LatestRun,
  LeaseGrant,
  LeaseHolder,
  LeaseRequest,
  RenewResult,
  TaskEvent,
  TaskEventLog,
  WriteOptions,
} from "./replica-types.js";
