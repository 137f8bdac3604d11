// Installs the durable anchors' packages (./package.json) on first use. better-sqlite3 has no
// prebuilt binary reachable from this network, so it is compiled here with node-gyp (about 3
// minutes on 2 cores, once); its own install script is skipped because it tries the download first.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const addon = `${here}node_modules/better-sqlite3/build/Release/better_sqlite3.node`;
/** The Node ABI the addon was compiled for: one built for another Node cannot load, so it is built again. */
const abiMarker = `${here}node_modules/.better-sqlite3-abi`;
const builtAbi = () => (existsSync(abiMarker) ? readFileSync(abiMarker, "utf8").trim() : undefined);

/**
 * Where this Node's headers are (include/node), for node-gyp's --nodedir: beside the binary in a Node release, or in
 * the platform package of the npm `node` package. Without it node-gyp takes npm's nodedir (Debian's: the system
 * Node's headers) and builds an addon this Node cannot load.
 */
function headersOfThisNode() {
  const bin = dirname(realpathSync(process.execPath));
  const candidates = [dirname(bin), join(dirname(bin), "node_modules", `node-${process.platform}-${process.arch}`)];
  const major = `#define NODE_MAJOR_VERSION ${process.versions.node.split(".")[0]}\n`;
  return candidates.find((dir) => {
    const header = join(dir, "include", "node", "node_version.h");
    return existsSync(header) && readFileSync(header, "utf8").includes(major);
  });
}

/** True when the anchors can run; false (with a note on stderr) when they could not be installed. */
export async function ensureAnchorDeps() {
  if (existsSync(addon) && builtAbi() === process.versions.modules) return true;
  process.stderr.write("durable anchors: installing bench/anchors (npm ci, then compiling better-sqlite3) ...\n");
  try {
    const nodedir = headersOfThisNode();
    if (!nodedir) throw new Error(`no headers of Node ${process.version} next to ${process.execPath}`);
    // npm, npx and node-gyp run on the Node that runs the bench, whatever `node` comes first on PATH; node-gyp
    // lets npm_config_* variables override its flags, so the headers go in both.
    const env = {
      ...process.env,
      PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`,
      npm_config_nodedir: nodedir,
    };
    const quiet = { cwd: here, env, stdio: ["ignore", "ignore", "inherit"] };
    if (!existsSync(`${here}node_modules/better-sqlite3`)) {
      execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"], quiet);
    }
    execFileSync("npx", ["--yes", "node-gyp", "rebuild", "--release", `--nodedir=${nodedir}`], {
      ...quiet,
      cwd: `${here}node_modules/better-sqlite3`,
    });
    // Loads it once in this Node: an addon built for another ABI fails here, not in the middle of a run.
    execFileSync(process.execPath, ["-e", `require(${JSON.stringify(addon)})`], quiet);
    writeFileSync(abiMarker, process.versions.modules);
    return true;
  } catch (error) {
    process.stderr.write(`durable anchors: skipped, install failed: ${error.message}\n`);
    return false;
  }
}
