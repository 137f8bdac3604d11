// The fencing rules every backend with leases applies to a write that carries a fence.

import type { Fence } from "../replica-types.js";
import { StoreError } from "../types.js";

/** A fence guards writes to its own context only. */
export function checkFenceFor(fence: Fence | undefined, tenant: string, contextId: string): void {
  if (fence && (fence.key.tenant !== tenant || fence.key.contextId !== contextId)) {
    throw new RangeError(
      `the fence of context ${JSON.stringify(fence.key.contextId)} cannot guard a write to context ${JSON.stringify(contextId)}`,
    );
  }
}

/** The error of a write whose fence is no longer the live lease of its context. */
export function fencedError(fence: Fence): StoreError {
  return new StoreError(
    "FENCED",
    `lease token ${fence.token} of task ${fence.taskId} is no longer the live lease of context ${JSON.stringify(fence.key.contextId)}`,
  );
}
