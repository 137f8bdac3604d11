/** A2A 0.3 params (validated by v03/params.ts) to the 1.0 requests the upstream takes. */
import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  CancelTaskRequestSchema,
  DeleteTaskPushNotificationConfigRequestSchema,
  GetExtendedAgentCardRequestSchema,
  GetTaskPushNotificationConfigRequestSchema,
  GetTaskRequestSchema,
  ListTaskPushNotificationConfigsRequestSchema,
  type Message,
  MessageSchema,
  type Part,
  PartSchema,
  Role,
  SendMessageRequestSchema,
  SubscribeToTaskRequestSchema,
  type TaskPushNotificationConfig,
  TaskPushNotificationConfigSchema,
} from "@parley/proto";
import type { z } from "zod";
import { dataPartCompatFlag, type V03Message, type V03Part, type V03PushConfig, type v03Params } from "./params.js";

function partToV1(p: V03Part): Part {
  const meta = p.metadata as JsonObject | undefined;
  switch (p.kind) {
    case "text":
      return create(PartSchema, { content: { case: "text", value: p.text }, metadata: meta });
    case "file": {
      const common = { filename: p.file.name ?? "", mediaType: p.file.mimeType ?? "", metadata: meta };
      return "bytes" in p.file
        ? create(PartSchema, { ...common, content: { case: "raw", value: Buffer.from(p.file.bytes, "base64") } })
        : create(PartSchema, { ...common, content: { case: "url", value: p.file.uri } });
    }
    case "data": {
      let value: unknown = p.data;
      let partMeta = meta;
      if (meta?.[dataPartCompatFlag] === true) {
        value = p.data.value ?? null;
        const { [dataPartCompatFlag]: _flag, ...rest } = meta;
        partMeta = Object.keys(rest).length > 0 ? rest : undefined;
      }
      return create(PartSchema, {
        content: { case: "data", value: fromJson(ValueSchema, value as JsonValue) },
        metadata: partMeta,
      });
    }
  }
}

function messageToV1(m: V03Message): Message {
  return create(MessageSchema, {
    messageId: m.messageId,
    contextId: m.contextId ?? "",
    taskId: m.taskId ?? "",
    role: m.role === "user" ? Role.USER : Role.AGENT,
    parts: m.parts.map(partToV1),
    metadata: m.metadata as JsonObject | undefined,
    extensions: m.extensions ?? [],
    referenceTaskIds: m.referenceTaskIds ?? [],
  });
}

function pushConfigToV1(taskId: string, c: V03PushConfig): TaskPushNotificationConfig {
  return create(TaskPushNotificationConfigSchema, {
    id: c.id ?? "",
    taskId,
    url: c.url,
    token: c.token ?? "",
    // 1.0 carries one scheme; 0.3 listed alternatives, of which the first is the one a sender would use.
    authentication: c.authentication
      ? { scheme: c.authentication.schemes[0] ?? "", credentials: c.authentication.credentials ?? "" }
      : undefined,
  });
}

export function sendParamsToV1(params: z.infer<typeof v03Params.messageSend>) {
  const cfg = params.configuration;
  return create(SendMessageRequestSchema, {
    message: messageToV1(params.message),
    metadata: params.metadata as JsonObject | undefined,
    configuration: cfg
      ? {
          acceptedOutputModes: cfg.acceptedOutputModes ?? [],
          historyLength: cfg.historyLength,
          // 0.3 defaulted to blocking; 1.0 expresses the opposite flag.
          returnImmediately: cfg.blocking === false,
          taskPushNotificationConfig: cfg.pushNotificationConfig
            ? pushConfigToV1(params.message.taskId ?? "", cfg.pushNotificationConfig)
            : undefined,
        }
      : undefined,
  });
}

export function taskQueryToV1(params: z.infer<typeof v03Params.taskQuery>) {
  return create(GetTaskRequestSchema, { id: params.id, historyLength: params.historyLength });
}

export function cancelParamsToV1(params: z.infer<typeof v03Params.taskId>) {
  return create(CancelTaskRequestSchema, { id: params.id, metadata: params.metadata as JsonObject | undefined });
}

export function resubscribeParamsToV1(params: z.infer<typeof v03Params.taskId>) {
  return create(SubscribeToTaskRequestSchema, { id: params.id });
}

export function setPushConfigToV1(params: z.infer<typeof v03Params.taskPushConfig>) {
  return pushConfigToV1(params.taskId, params.pushNotificationConfig);
}

export function getPushConfigToV1(params: z.infer<typeof v03Params.getPushConfig>) {
  return create(GetTaskPushNotificationConfigRequestSchema, {
    taskId: params.id,
    id: params.pushNotificationConfigId ?? "",
  });
}

export function listPushConfigsToV1(params: z.infer<typeof v03Params.taskId>) {
  return create(ListTaskPushNotificationConfigsRequestSchema, { taskId: params.id });
}

export function deletePushConfigToV1(params: z.infer<typeof v03Params.deletePushConfig>) {
  return create(DeleteTaskPushNotificationConfigRequestSchema, {
    taskId: params.id,
    id: params.pushNotificationConfigId,
  });
}

export function extendedCardRequestToV1() {
  return create(GetExtendedAgentCardRequestSchema, {});
}
