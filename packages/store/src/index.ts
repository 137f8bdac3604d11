export { type CreateStoreOptions, createStore, isPostgresUrl } from "./create-store.js";
export { createMemoryEventLog, type MemoryEventLogOptions } from "./events/memory-event-log.js";
export { fenceStore } from "./leases/fenced-store.js";
export { createMemoryLeases, type MemoryLeases, type MemoryLeasesOptions } from "./leases/memory-leases.js";
export {
  createLevelThreadStore,
  type LevelThreadStore,
  type LevelThreadStoreOptions,
  threadDigest,
} from "./level-thread-store.js";
export { type Migration, migrate, migrations } from "./postgres/migrations.js";
export { createPostgresBackend, type PostgresBackend, type PostgresBackendOptions } from "./postgres/pg-backend.js";
export * from "./types.js";
