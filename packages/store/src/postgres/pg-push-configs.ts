// Push notification configs in the PostgreSQL backend.
import { checkConfigIds, checkListPushConfigs, checkPushConfig } from "../core/checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { type PushConfigRecord, StoreError } from "../types.js";
import type { PgContext } from "./pg-context.js";
import { asBuffer, configKeyOf, idBytes, taskKeyOf } from "./pg-keys.js";
import { PUSH_COLUMNS, type PushRow, toPush } from "./pg-rows.js";

export async function putPushConfig(ctx: PgContext, config: PushConfigRecord): Promise<void> {
  checkPushConfig(config);
  await ctx.pool.query(
    `INSERT INTO parley_push_configs (task_key, config_key, tenant, task_id, config_id, payload)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (task_key, config_key) DO UPDATE SET payload = EXCLUDED.payload`,
    [
      taskKeyOf(config.tenant, config.taskId),
      configKeyOf(config.configId),
      idBytes(config.tenant),
      idBytes(config.taskId),
      idBytes(config.configId),
      asBuffer(config.payload),
    ],
  );
}

export async function getPushConfig(
  ctx: PgContext,
  tenant: string,
  taskId: string,
  configId: string,
): Promise<PushConfigRecord | undefined> {
  checkConfigIds(tenant, taskId, configId);
  const { rows } = await ctx.pool.query<PushRow>(
    `SELECT ${PUSH_COLUMNS} FROM parley_push_configs WHERE task_key = $1 AND config_key = $2`,
    [taskKeyOf(tenant, taskId), configKeyOf(configId)],
  );
  const row = rows[0];
  if (!row) return undefined;
  const config = toPush(row);
  if (config.tenant !== tenant || config.taskId !== taskId || config.configId !== configId) {
    throw new StoreError("CORRUPT", `push config row of ${JSON.stringify(configId)} belongs to another config`);
  }
  return config;
}

export async function listPushConfigs(
  ctx: PgContext,
  tenant: string,
  taskId: string,
  page: { readonly limit: number; readonly cursor?: string },
): Promise<{ readonly configs: PushConfigRecord[]; readonly nextCursor?: string }> {
  const start = checkListPushConfigs(tenant, taskId, page);
  const { limit, tag } = start;
  const after = start.after ? asBuffer(start.after) : Buffer.alloc(0);
  const { rows } = await ctx.pool.query<PushRow & { config_key: Buffer }>(
    `SELECT ${PUSH_COLUMNS}, config_key FROM parley_push_configs
     WHERE task_key = $1 AND config_key > $2 ORDER BY config_key LIMIT $3`,
    [taskKeyOf(tenant, taskId), after, limit + 1],
  );
  const pageRows = rows.slice(0, limit);
  const configs = pageRows.map(toPush);
  if (rows.length <= limit) return { configs };
  return { configs, nextCursor: encodeCursor(cursorKinds.push, tag, pageRows[pageRows.length - 1]!.config_key) };
}

export async function deletePushConfig(
  ctx: PgContext,
  tenant: string,
  taskId: string,
  configId: string,
): Promise<boolean> {
  checkConfigIds(tenant, taskId, configId);
  const result = await ctx.pool.query("DELETE FROM parley_push_configs WHERE task_key = $1 AND config_key = $2", [
    taskKeyOf(tenant, taskId),
    configKeyOf(configId),
  ]);
  return (result.rowCount ?? 0) > 0;
}

export const pushConfigJobs = { putPushConfig, getPushConfig, listPushConfigs, deletePushConfig };
