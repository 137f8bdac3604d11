/**
 * The A2A 0.3 request shapes the bridge accepts (from a2aproject/A2A v0.3.0
 * types/src/types.ts), validated with zod so an error names the field.
 * Everything 0.3-shaped lives under v03/, so the legacy protocol's quirks
 * (kind discriminators, kebab-case states, `final`, FilePart, inverted
 * `blocking`) stay out of the rest of the bridge.
 */
import { z } from "zod";

const metadata = z.record(z.string(), z.unknown()).optional();
const fileBase = { name: z.string().optional(), mimeType: z.string().optional() };
const part = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("text"), text: z.string(), metadata }),
  z.object({
    kind: z.literal("file"),
    file: z.union([z.object({ ...fileBase, bytes: z.base64() }), z.object({ ...fileBase, uri: z.string().min(1) })]),
    metadata,
  }),
  z.object({ kind: z.literal("data"), data: z.record(z.string(), z.unknown()), metadata }),
]);
const message = z.object({
  kind: z.literal("message").optional(),
  messageId: z.string().min(1),
  role: z.enum(["user", "agent"]),
  parts: z.array(part).min(1),
  contextId: z.string().optional(),
  taskId: z.string().optional(),
  metadata,
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(z.string()).optional(),
});
const pushNotificationConfig = z.object({
  id: z.string().optional(),
  url: z.string().min(1),
  token: z.string().optional(),
  authentication: z.object({ schemes: z.array(z.string()), credentials: z.string().optional() }).optional(),
});
const int32 = z.number().int().min(0).max(2_147_483_647);

export const v03Params = {
  messageSend: z.object({
    message,
    configuration: z
      .object({
        acceptedOutputModes: z.array(z.string()).optional(),
        historyLength: int32.optional(),
        pushNotificationConfig: pushNotificationConfig.optional(),
        blocking: z.boolean().optional(),
      })
      .optional(),
    metadata,
  }),
  taskQuery: z.object({ id: z.string().min(1), historyLength: int32.optional(), metadata }),
  taskId: z.object({ id: z.string().min(1), metadata }),
  taskPushConfig: z.object({ taskId: z.string().min(1), pushNotificationConfig }),
  getPushConfig: z.object({ id: z.string().min(1), pushNotificationConfigId: z.string().optional(), metadata }),
  deletePushConfig: z.object({ id: z.string().min(1), pushNotificationConfigId: z.string().min(1), metadata }),
  none: z.union([z.object({}).loose(), z.undefined(), z.null()]),
};

export type V03Part = z.infer<typeof part>;
export type V03Message = z.infer<typeof message>;
export type V03PushConfig = z.infer<typeof pushNotificationConfig>;

/** Marks a 0.3 DataPart that wraps a non-object 1.0 value, the same flag a2a-js uses, so both sides round-trip. */
export const dataPartCompatFlag = "data_part_compat";
