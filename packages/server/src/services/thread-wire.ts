// The ThreadService's wire forms of stored records, shared by its handlers and the export/import handlers.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Provenance, type Thread, ThreadSchema } from "@parley/proto";
import type { ThreadMeta } from "@parley/store";

export const provenances = {
  user: Provenance.USER,
  agent: Provenance.AGENT,
  "inter-session": Provenance.INTER_SESSION,
  imported: Provenance.IMPORTED,
} as const;

export function threadFromMeta(meta: ThreadMeta): Thread {
  return create(ThreadSchema, {
    contextId: meta.contextId,
    messageCount: BigInt(meta.messageCount),
    lastSequence: BigInt(meta.lastSequence),
    createTime: timestampFromMs(meta.createdAt),
    updateTime: timestampFromMs(meta.updatedAt),
  });
}
