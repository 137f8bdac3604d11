// Whether the LevelDB store may acknowledge writes, and why not: the state behind readiness and the writes' errors.

import type { StoreHealth } from "../replica-types.js";
import { StoreError } from "../types.js";

/** What a failed write's error says, in words a client may see (no path, no LevelDB text). */
export function writeFailureCondition(error: unknown): string {
  const text = String((error as Error)?.message ?? error);
  if (/No space left on device|ENOSPC/i.test(text)) return "the disk is full (ENOSPC)";
  if (/Disk quota exceeded|EDQUOT/i.test(text)) return "the disk quota is exhausted (EDQUOT)";
  if (/Read-only file system|EROFS/i.test(text)) return "the file system is read-only (EROFS)";
  if (/Too many open files|EMFILE/i.test(text)) return "the process has too many open files (EMFILE)";
  if (/Corruption/i.test(text)) return "LevelDB reported corruption";
  return "an I/O error";
}

export interface LevelHealth {
  /** What readiness reports. */
  current(): StoreHealth;
  /** Whether a write may go to the handle now. */
  readonly writable: boolean;
  /** The error a write refused while not writable gets. */
  refusal(): StoreError;
  /** A write through the handle failed: no later write is acknowledged until `writesResumed`. */
  writeFailed(error: unknown): StoreError;
  /** The handle was reopened and a probe write landed. */
  writesResumed(): void;
  /** The open check found damage: reads go on, writes are refused until the operator acts (see level-open-check). */
  damaged(reason: string): void;
  /** Called with each change (for the log); set by the store's owner. */
  onChange?: (health: StoreHealth, cause?: unknown) => void;
}

export function createLevelHealth(): LevelHealth {
  let failed: { condition: string; since: number; cause: unknown } | undefined;
  let damage: string | undefined;
  const health: LevelHealth = {
    current() {
      if (damage !== undefined) return { ok: false, condition: "damaged", reason: damage };
      if (failed) {
        return {
          ok: false,
          condition: "write-failed",
          reason: `writes fail since ${new Date(failed.since).toISOString()}: ${failed.condition}; they resume once the cause is gone`,
        };
      }
      return { ok: true };
    },
    get writable() {
      return failed === undefined && damage === undefined;
    },
    refusal() {
      if (damage !== undefined) {
        return new StoreError("UNAVAILABLE", `the store is not accepting writes: it was found damaged (${damage})`);
      }
      return new StoreError(
        "UNAVAILABLE",
        `the store cannot write: ${failed?.condition ?? "it is reopening"}; retry once the cause is gone`,
        { cause: failed?.cause },
      );
    },
    writeFailed(error) {
      if (!failed) {
        failed = { condition: writeFailureCondition(error), since: Date.now(), cause: error };
        health.onChange?.(health.current(), error);
      }
      return new StoreError(
        "UNAVAILABLE",
        `the store cannot write: ${failed.condition}; retry once the cause is gone`,
        {
          cause: error,
        },
      );
    },
    writesResumed() {
      if (!failed) return;
      failed = undefined;
      health.onChange?.(health.current());
    },
    damaged(reason) {
      damage = damage === undefined ? reason : `${damage}; ${reason}`;
      health.onChange?.(health.current());
    },
  };
  return health;
}
