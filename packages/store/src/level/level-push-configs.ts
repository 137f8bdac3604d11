// Push notification configs of the LevelDB backend, under their task's digest.
import { toHex } from "../core/bytes.js";
import { checkConfigIds, checkListPushConfigs, checkPushConfig } from "../core/checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { configHash, taskHash } from "../core/digests.js";
import { type PushConfigRecord, StoreError } from "../types.js";
import type { LevelContext } from "./level-context.js";
import { key, prefixEnd, T_PUSH } from "./level-keys.js";
import { decodeOrCorrupt, decodePush, encodePush } from "./level-records.js";

const configKey = (tenant: string, taskId: string, configId: string) =>
  key(T_PUSH, taskHash(tenant, taskId), configHash(configId));

export async function putPushConfig(ctx: LevelContext, config: PushConfigRecord): Promise<void> {
  checkPushConfig(config);
  await ctx.write([
    { type: "put", key: configKey(config.tenant, config.taskId, config.configId), value: encodePush(config) },
  ]);
}

async function readPush(ctx: LevelContext, k: Uint8Array, tenant: string, taskId: string, configId: string) {
  const raw = await ctx.db.get(k);
  if (raw === undefined) return undefined;
  const config = decodeOrCorrupt("push config", k, () => decodePush(raw));
  if (config.tenant !== tenant || config.taskId !== taskId || config.configId !== configId) {
    throw new StoreError("CORRUPT", `push config at key ${toHex(k)} belongs to another config`);
  }
  return config;
}

export async function getPushConfig(
  ctx: LevelContext,
  tenant: string,
  taskId: string,
  configId: string,
): Promise<PushConfigRecord | undefined> {
  checkConfigIds(tenant, taskId, configId);
  return readPush(ctx, configKey(tenant, taskId, configId), tenant, taskId, configId);
}

export async function listPushConfigs(
  ctx: LevelContext,
  tenant: string,
  taskId: string,
  options: { readonly limit: number; readonly cursor?: string },
): Promise<{ readonly configs: PushConfigRecord[]; readonly nextCursor?: string }> {
  const { limit, tag, after } = checkListPushConfigs(tenant, taskId, options);
  const prefix = key(T_PUSH, taskHash(tenant, taskId));
  const gt = after && key(prefix, after);
  const entries = await ctx.db
    .iterator({ ...(gt ? { gt } : { gte: prefix }), lt: prefixEnd(prefix), limit: limit + 1 })
    .all();
  const page = entries.slice(0, limit);
  const configs = page.map(([k, v]) => {
    const config = decodeOrCorrupt("push config", k, () => decodePush(v));
    if (config.tenant !== tenant || config.taskId !== taskId) {
      throw new StoreError("CORRUPT", `push config at key ${toHex(k)} belongs to another task`);
    }
    return config;
  });
  if (entries.length <= limit) return { configs };
  const lastKey = page[page.length - 1]![0];
  return { configs, nextCursor: encodeCursor(cursorKinds.push, tag, lastKey.subarray(prefix.length)) };
}

export async function deletePushConfig(
  ctx: LevelContext,
  tenant: string,
  taskId: string,
  configId: string,
): Promise<boolean> {
  checkConfigIds(tenant, taskId, configId);
  const k = configKey(tenant, taskId, configId);
  return ctx.locks.run(`p:${toHex(k)}`, async () => {
    if (!(await readPush(ctx, k, tenant, taskId, configId))) return false;
    await ctx.write([{ type: "del", key: k }]);
    return true;
  });
}

export const pushConfigJobs = { putPushConfig, getPushConfig, listPushConfigs, deletePushConfig };
