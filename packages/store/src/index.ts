export { threadDigest } from "./core/digests.js";
export { type CreateStoreOptions, createStore, isPostgresUrl } from "./create-store.js";
export {
  createLevelThreadStore,
  type LevelThreadStore,
  type LevelThreadStoreOptions,
} from "./level/level-thread-store.js";
export { type Migration, migrate, migrations } from "./postgres/migrations.js";
export { createPostgresBackend, type PostgresBackend, type PostgresBackendOptions } from "./postgres/pg-backend.js";
export { isDatabaseError, isDatabaseUnavailable } from "./postgres/pg-errors.js";
export * from "./types.js";
