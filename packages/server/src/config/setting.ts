import { z } from "zod";

export interface SettingMeta {
  /** What the setting does, one line, for the help text and the configuration doc table. */
  readonly description: string;
  /** The environment variable that sets it. */
  readonly env?: string;
  /** The command-line flag that sets it, without the leading "--". */
  readonly flag?: string;
  /** What values are allowed, when the type and range alone do not say it (a URL, a map). */
  readonly allowed?: string;
  /** Read by parley-bridge only; parley-server accepts the key in a shared file and ignores it. */
  readonly bridgeOnly?: boolean;
}

export const settings = z.registry<SettingMeta>();

export function setting<T extends z.ZodType>(schema: T, meta: SettingMeta): T {
  settings.add(schema, meta);
  return schema;
}

export const port = z.int().min(0).max(65_535);
export const mebibyte = 1024 * 1024;
// A section may be left out of the file: its keys then take their defaults (every key has one).
export const section = <S extends z.core.$ZodLooseShape>(shape: S) => z.strictObject(shape).prefault({} as never);
