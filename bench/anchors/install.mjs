// Installs the durable anchors' packages (./package.json) on first use. better-sqlite3 (13 and later) ships
// prebuilt Node-API binaries in its npm package, so nothing is compiled and its install script is skipped.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));

/** Opens an in-memory database with this Node: throws when better-sqlite3 is missing or cannot load here. */
function checkSqlite(options) {
  execFileSync(process.execPath, ["-e", 'new (require("better-sqlite3"))(":memory:").close()'], options);
}

/** True when the anchors can run; false (with a note on stderr) when they could not be installed. */
export async function ensureAnchorDeps() {
  // npm runs on the Node that runs the bench, whatever `node` comes first on PATH.
  const env = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}` };
  const quiet = { cwd: here, env, stdio: ["ignore", "ignore", "inherit"] };
  if (existsSync(`${here}node_modules/better-sqlite3`)) {
    try {
      checkSqlite({ ...quiet, stdio: "ignore" });
      return true;
    } catch {
      // An install from an older package-lock (a compiled addon for another Node): installed again below.
    }
  }
  process.stderr.write("durable anchors: installing bench/anchors (npm ci) ...\n");
  try {
    execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"], quiet);
    checkSqlite(quiet);
    return true;
  } catch (error) {
    process.stderr.write(`durable anchors: skipped, install failed: ${error.message}\n`);
    return false;
  }
}
