import { randomUUID } from "node:crypto";
import { clone, create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createTypedError, invalidArgument } from "@parley/domain";
import { fromStore } from "@parley/domain/internal";
import {
  type ListTaskPushNotificationConfigsResponse,
  ListTaskPushNotificationConfigsResponseSchema,
  type TaskPushNotificationConfig,
  TaskPushNotificationConfigSchema,
} from "@parley/proto";
import type { ThreadStore } from "@parley/store";
import { createPushAddressPolicy } from "./push-address-policy.js";
import { checkPushUrl, type PushDestinationRules } from "./push-destination.js";
import type { PushSettings } from "./push-settings.js";

/** The destination rules of the server's push settings (push.allowedHosts, push.allowedAddresses). */
export function pushDestinationRules(config: PushSettings): PushDestinationRules {
  return {
    allowedHosts: config.push.allowedHosts,
    addresses: createPushAddressPolicy(config.push.allowedAddresses),
  };
}

const headerUnsafe = /[\r\n\0]/;
const defaultPageSize = 50;
const maxPageSize = 100;

export interface PushConfigs {
  /** Checks a config a client sent: url, destination host, authentication. */
  validate(config: TaskPushNotificationConfig): void;
  /** Validates and stores a config for a task known to exist; an empty id gets a generated one. */
  register(tenant: string, taskId: string, config: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig>;
  get(tenant: string, taskId: string, id: string): Promise<TaskPushNotificationConfig>;
  list(
    tenant: string,
    taskId: string,
    pageSize: number,
    pageToken: string,
  ): Promise<ListTaskPushNotificationConfigsResponse>;
  /** Every config of a task, for delivery. */
  all(tenant: string, taskId: string): Promise<TaskPushNotificationConfig[]>;
  /** Idempotent: deleting a config that is not there succeeds. */
  delete(tenant: string, taskId: string, id: string): Promise<void>;
}

/** Push notification configs, persisted in the thread store as binary TaskPushNotificationConfig. */
export function createPushConfigs(deps: { readonly store: ThreadStore; readonly config: PushSettings }): PushConfigs {
  const { store, config } = deps;
  const decode = (payload: Uint8Array) => fromBinary(TaskPushNotificationConfigSchema, payload);
  const rules = pushDestinationRules(config);

  const validate = (pushConfig: TaskPushNotificationConfig): void => {
    if (pushConfig.url === "") throw invalidArgument("push notification config url is required");
    // Literal addresses and localhost are refused here; a name is checked against its addresses at delivery.
    const destination = checkPushUrl(pushConfig.url, rules);
    if (!destination.ok) throw invalidArgument(destination.reason);
    const auth = pushConfig.authentication;
    if (auth) {
      if (auth.scheme.trim() === "") {
        throw invalidArgument("push notification config authentication.scheme is required (e.g. Bearer)");
      }
      if (/\s/.test(auth.scheme) || headerUnsafe.test(auth.credentials)) {
        throw invalidArgument(
          "push notification config authentication must be a single-word scheme and credentials without line breaks",
        );
      }
    }
    if (headerUnsafe.test(pushConfig.token))
      throw invalidArgument("push notification config token must not hold line breaks");
  };

  return {
    validate,

    async register(tenant, taskId, pushConfig) {
      validate(pushConfig);
      const stored = clone(TaskPushNotificationConfigSchema, pushConfig);
      stored.taskId = taskId;
      // Replacing a config (its id again) adds none; a new one counts against the task's cap. Every config is
      // posted every event, so the cap bounds the POSTs (and memory) one task can cost.
      const replaces =
        stored.id !== "" && (await fromStore(store.getPushConfig(tenant, taskId, stored.id))) !== undefined;
      if (!replaces) {
        const limit = config.push.maxConfigsPerTask;
        const page = await fromStore(store.listPushConfigs(tenant, taskId, { limit }));
        if (page.configs.length >= limit) {
          throw createTypedError(
            "LIMIT_EXCEEDED",
            `task ${JSON.stringify(taskId)} already has ${limit} push notification configs, the most push.maxConfigsPerTask (PARLEY_PUSH_MAX_CONFIGS_PER_TASK) allows; delete one or reuse its id`,
            { taskId, limit: String(limit), setting: "push.maxConfigsPerTask" },
          );
        }
      }
      if (stored.id === "") stored.id = randomUUID();
      await fromStore(
        store.putPushConfig({
          tenant,
          taskId,
          configId: stored.id,
          payload: toBinary(TaskPushNotificationConfigSchema, stored),
        }),
      );
      return stored;
    },

    async get(tenant, taskId, id) {
      if (id === "") throw invalidArgument("id (the push notification config id) is required");
      const record = await fromStore(store.getPushConfig(tenant, taskId, id));
      if (!record) {
        throw createTypedError(
          "TASK_NOT_FOUND",
          `push notification config ${JSON.stringify(id)} of task ${JSON.stringify(taskId)} was not found`,
          { taskId, configId: id },
        );
      }
      return decode(record.payload);
    },

    async list(tenant, taskId, pageSize, pageToken) {
      if (pageSize < 0 || pageSize > maxPageSize) {
        throw invalidArgument(`pageSize must be between 1 and ${maxPageSize} (0: ${defaultPageSize}), got ${pageSize}`);
      }
      const page = await fromStore(
        store.listPushConfigs(tenant, taskId, {
          limit: pageSize === 0 ? defaultPageSize : pageSize,
          ...(pageToken !== "" ? { cursor: pageToken } : {}),
        }),
      );
      return create(ListTaskPushNotificationConfigsResponseSchema, {
        configs: page.configs.map((record) => decode(record.payload)),
        nextPageToken: page.nextCursor ?? "",
      });
    },

    async all(tenant, taskId) {
      const configs: TaskPushNotificationConfig[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.listPushConfigs(tenant, taskId, {
          limit: maxPageSize,
          ...(cursor !== undefined ? { cursor } : {}),
        });
        for (const record of page.configs) configs.push(decode(record.payload));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      return configs;
    },

    async delete(tenant, taskId, id) {
      if (id === "") throw invalidArgument("id (the push notification config id) is required");
      await fromStore(store.deletePushConfig(tenant, taskId, id));
    },
  };
}
