export * from "./conversation-types.js";
export { threadDigest } from "./core/digests.js";
export { type CreateStoreOptions, createStore, isPostgresUrl } from "./create-store.js";
export {
  createLevelThreadStore,
  DEFAULT_WRITE_BUFFER_BYTES,
  type LevelThreadStore,
  type LevelThreadStoreOptions,
  MAX_WRITE_BUFFER_BYTES,
  MIN_WRITE_BUFFER_BYTES,
} from "./level/level-thread-store.js";
export { type Migration, migrate, migrations } from "./postgres/migrations.js";
export { createPostgresBackend, type PostgresBackend, type PostgresBackendOptions } from "./postgres/pg-backend.js";
export { isDatabaseError, isDatabaseUnavailable } from "./postgres/pg-errors.js";
export * from "./types.js";
