import { mkdir, realpath } from "node:fs/promises";
import { StoreError } from "../types.js";

// Kept on globalThis under a registered symbol so that two copies of this
// module (e.g. src and dist loaded side by side) still share one registry.
const registryKey = Symbol.for("@parley/store.open-level-paths");
type Registry = Set<string>;
const globalSlot = globalThis as unknown as Record<symbol, Registry | undefined>;
const registry: Registry = globalSlot[registryKey] ?? new Set<string>();
globalSlot[registryKey] = registry;

/**
 * Claims a database directory for this process. A second in-process LevelDB
 * open of the same directory must never be attempted: its failure closes a
 * file descriptor on LOCK, which drops the first instance's fcntl lock and
 * lets another process open the database underneath it.
 */
export async function claimPath(path: string): Promise<{ readonly realPath: string; release(): void }> {
  await mkdir(path, { recursive: true });
  const realPath = await realpath(path);
  // No await between the check and the add: concurrent claims of one path cannot both pass.
  if (registry.has(realPath)) {
    throw new StoreError("LOCKED", `the database at ${realPath} is already open in this process`);
  }
  registry.add(realPath);
  let released = false;
  return {
    realPath,
    release() {
      if (released) return;
      released = true;
      registry.delete(realPath);
    },
  };
}
