// The configuration of parley-server and parley-bridge: one zod schema (config/schema.ts) from which the
// loader, its error messages, the --help text and docs/configuration.md are derived.
import { renderHelp } from "./config/help.js";

export { renderConfigTable, renderHelp } from "./config/help.js";
export { type LoadConfigOptions, type LoadedConfig, loadConfig } from "./config/load-config.js";
export {
  type AgentConfig,
  defaultConfig,
  type ParleyConfig,
  type PeerConfig,
  parleyConfigSchema,
  type SettingMeta,
  settings,
} from "./config/schema.js";
export { type SettingInfo, settingList } from "./config/settings.js";
export { agentShortcuts, ConfigError, type ConfigProblem, type Program } from "./config/sources.js";

/** parley-server's --help text. */
export const configHelp: string = renderHelp("parley-server");
