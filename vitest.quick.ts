import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { configDefaults, defineConfig, mergeConfig, type UserConfig } from "vitest/config";

/**
 * What a spec file uses that `npm run test:quick` does without: a local PostgreSQL, Chromium, Python, root. A spec
 * whose source names one of these must be in its workspace's slow list; the quick run refuses to start otherwise,
 * so the selection cannot drift as specs change.
 */
const needsServices =
  /pg-helpers|private-postgres|replica-set|from "pg"|PARLEY_TEST_PG_URL|playwright|chromium|python3|strace|apt-get/;

/** The spec files of a workspace, relative to it. */
function specFiles(dir: string): string[] {
  return ["src", "test"].flatMap((folder) => {
    try {
      return readdirSync(join(dir, folder), { recursive: true, encoding: "utf8" })
        .filter((name) => name.endsWith(".spec.ts"))
        .map((name) => `${folder}/${name}`);
    } catch {
      return [];
    }
  });
}

/**
 * A workspace's vitest config: the shared one, and with PARLEY_TEST_QUICK=1 (`npm run test:quick`) the same run
 * without `slowSpecs` (paths relative to the workspace): the unit and loopback tests that need no root,
 * PostgreSQL or browser. `npm test` runs every spec.
 */
export function withSlowSpecs(base: UserConfig, dir: string, slowSpecs: readonly string[]): UserConfig {
  if (process.env.PARLEY_TEST_QUICK !== "1") return base;
  const listed = new Set(slowSpecs);
  const unlisted = specFiles(dir).filter(
    (spec) => !listed.has(spec) && needsServices.test(readFileSync(join(dir, spec), "utf8")),
  );
  if (unlisted.length > 0) {
    throw new Error(
      `test:quick: ${unlisted.join(", ")} in ${dir} use PostgreSQL, a browser, Python or root ` +
        "(see vitest.quick.ts): add them to the slowSpecs of that workspace's vitest.config.ts",
    );
  }
  return mergeConfig(base, defineConfig({ test: { exclude: [...configDefaults.exclude, ...slowSpecs] } }));
}
