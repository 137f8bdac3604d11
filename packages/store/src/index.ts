export {
  createLevelThreadStore,
  type LevelThreadStore,
  type LevelThreadStoreOptions,
  threadDigest,
} from "./level-thread-store.js";
export * from "./types.js";
