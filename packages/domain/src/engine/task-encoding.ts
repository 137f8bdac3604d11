import { type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { type Message, MessageSchema } from "@parley/proto";
import { concatBytes } from "@parley/store";
import { structField } from "./struct-encoding.js";
import { encodeMessageBytes } from "./wire-encoding.js";

/** Message.metadata's field number in lf.a2a.v1.Message (extensions = 7 and reference_task_ids = 8 follow it). */
const MESSAGE_METADATA_FIELD = 6;

/**
 * A message's binary encoding, toBinary's bytes exactly (a stored message's bytes recognise its retries, also
 * those encoded by another version): metadata is written directly only where toBinary puts it last, before no
 * later field.
 */
export function encodeMessage(message: Message): Uint8Array {
  const direct = encodeMessageBytes(message);
  if (direct) return direct;
  const metadata = message.metadata;
  const last =
    metadata !== undefined &&
    message.extensions.length === 0 &&
    message.referenceTaskIds.length === 0 &&
    (message.$unknown === undefined || message.$unknown.length === 0);
  if (!last) return toBinary(MessageSchema, message);
  return concatBytes([
    toBinaryWith(MessageSchema, message, { metadata: undefined }),
    structField(MESSAGE_METADATA_FIELD, metadata),
  ]);
}

/**
 * toBinary of `value` with some fields set to `blanks` for the call and restored after: the fields the caller
 * then writes by hand (Struct metadata). No copy of the message is made.
 */
function toBinaryWith<Desc extends DescMessage>(
  schema: Desc,
  value: MessageShape<Desc>,
  blanks: Partial<MessageShape<Desc>>,
): Uint8Array {
  const target = value as Record<string, unknown>;
  const saved = Object.keys(blanks).map((k) => [k, target[k]] as const);
  Object.assign(target, blanks);
  try {
    return toBinary(schema, value);
  } finally {
    for (const [k, v] of saved) target[k] = v;
  }
}
