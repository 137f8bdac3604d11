// Installs the durable anchors' packages (./package.json) on first use. better-sqlite3 has no
// prebuilt binary reachable from this network, so it is compiled here with node-gyp (about 3
// minutes on 2 cores, once); its own install script is skipped because it tries the download first.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const addon = `${here}node_modules/better-sqlite3/build/Release/better_sqlite3.node`;
/** The Node ABI the addon was compiled for: one built for another Node cannot load, so it is built again. */
const abiMarker = `${here}node_modules/.better-sqlite3-abi`;
const builtAbi = () => (existsSync(abiMarker) ? readFileSync(abiMarker, "utf8").trim() : undefined);

/** True when the anchors can run; false (with a note on stderr) when they could not be installed. */
export async function ensureAnchorDeps() {
  if (existsSync(addon) && builtAbi() === process.versions.modules) return true;
  process.stderr.write("durable anchors: installing bench/anchors (npm ci, then compiling better-sqlite3) ...\n");
  try {
    // npm, npx and node-gyp run on the Node that runs the bench, whatever `node` comes first on PATH.
    const env = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}` };
    const quiet = { cwd: here, env, stdio: ["ignore", "ignore", "inherit"] };
    if (!existsSync(`${here}node_modules/better-sqlite3`)) {
      execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"], quiet);
    }
    execFileSync("npx", ["--yes", "node-gyp", "rebuild", "--release"], {
      ...quiet,
      cwd: `${here}node_modules/better-sqlite3`,
    });
    writeFileSync(abiMarker, process.versions.modules);
    return existsSync(addon);
  } catch (error) {
    process.stderr.write(`durable anchors: skipped, install failed: ${error.message}\n`);
    return false;
  }
}
