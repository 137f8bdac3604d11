// Installs the durable anchors' packages (./package.json) on first use. better-sqlite3 has no
// prebuilt binary reachable from this network, so it is compiled here with node-gyp (about 3
// minutes on 2 cores, once); its own install script is skipped because it tries the download first.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const addon = `${here}node_modules/better-sqlite3/build/Release/better_sqlite3.node`;

/** True when the anchors can run; false (with a note on stderr) when they could not be installed. */
export async function ensureAnchorDeps() {
  if (existsSync(addon)) return true;
  process.stderr.write("durable anchors: installing bench/anchors (npm ci, then compiling better-sqlite3) ...\n");
  try {
    const quiet = { cwd: here, stdio: ["ignore", "ignore", "inherit"] };
    execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"], quiet);
    execFileSync("npx", ["--yes", "node-gyp", "rebuild", "--release"], {
      ...quiet,
      cwd: `${here}node_modules/better-sqlite3`,
    });
    return existsSync(addon);
  } catch (error) {
    process.stderr.write(`durable anchors: skipped, install failed: ${error.message}\n`);
    return false;
  }
}
