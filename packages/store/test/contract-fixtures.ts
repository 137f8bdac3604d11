import { afterEach } from "vitest";
import type { TaskEvent } from "../src/backends.js";
import type { ConversationEvent, ConversationRecord, StoreBackend, ThreadKey } from "../src/index.js";
import { text } from "./helpers.js";

export const key: ThreadKey = { tenant: "acme", contextId: "ctx-1" };
export const msg = (id: string, payload: Uint8Array = text(id)) => ({
  messageId: id,
  provenance: "user" as const,
  payload,
});
export { task } from "./helpers.js";
export const event = (seq: number, final = false): TaskEvent => ({ seq, payload: text(`e${seq}`), final });

/** A conversation record of tenant acme between two contexts (running, one event, unless overridden). */
export const conv = (
  conversationId: string,
  contextIds: readonly [string, string],
  overrides: Partial<ConversationRecord> = {},
): ConversationRecord => ({
  tenant: "acme",
  conversationId,
  state: 1,
  createdAt: 1_000,
  updatedAt: 1_000,
  agents: ["alpha", "beta"],
  contextIds,
  eventCount: 1,
  payload: text(`summary of ${conversationId}`),
  ...overrides,
});
export const convEvent = (seq: number): ConversationEvent => ({ seq, payload: text(`step ${seq}`) });

/** Opens backends for one describe block and closes each after its test. */
export function openedBackends<B extends StoreBackend>(factory: (options: { now?: () => number }) => Promise<B>) {
  const opened: B[] = [];
  afterEach(async () => {
    while (opened.length > 0) await opened.pop()!.close();
  });
  return async (options: { now?: () => number } = {}): Promise<B> => {
    const backend = await factory(options);
    opened.push(backend);
    return backend;
  };
}
