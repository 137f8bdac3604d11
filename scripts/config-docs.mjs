// Rewrites the configuration tables of docs/configuration.md from the schema (packages/server/src/config/schema.ts),
// the same definitions the loader and --help use. packages/server/test/config.spec.ts fails until this is run
// after a setting changes. Needs a build: `npm run docs:config` builds first.
import { renderConfigTable } from "@parley/server";
import { replaceSection } from "./docs-section.mjs";

const file = new URL("../docs/configuration.md", import.meta.url);
try {
  replaceSection(file, "<!-- config-table:start", "<!-- config-table:end -->", renderConfigTable());
} catch (error) {
  console.error(`config-docs: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(2);
}
console.log("config-docs: docs/configuration.md configuration tables rewritten");
