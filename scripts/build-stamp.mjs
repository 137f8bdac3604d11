// The build stamp of a workspace: a digest of what its build compiles (every file under src/ but tests, its
// tsconfigs and, for the console, the page and bundler config Vite builds from),
// written into dist/ after each build, so a test run can tell that dist/ was built from the src/ it sees.
// `node scripts/build-stamp.mjs` (in a workspace, after tsc) writes dist/.build-stamp.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

export const stampFile = join("dist", ".build-stamp");

function* inputs(dir) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* inputs(path);
    // Every source, not only .ts: the console's .tsx views and .css are build inputs too.
    else if (!/\.(spec|test)\.tsx?$/.test(name)) yield path;
  }
}

/** The digest of a workspace's build inputs; content only, so checkouts and cache restores do not change it. */
export function sourceDigest(workspace) {
  const hash = createHash("sha256");
  const files = [...inputs(join(workspace, "src"))];
  for (const config of ["tsconfig.build.json", "tsconfig.json", "index.html", "vite.config.ts"]) {
    if (existsSync(join(workspace, config))) files.push(join(workspace, config));
  }
  for (const file of files) {
    hash.update(relative(workspace, file)).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(join(process.cwd(), stampFile), `${sourceDigest(process.cwd())}\n`);
}
