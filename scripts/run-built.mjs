// Shared by the committed bin entries (packages/server/bin, apps/bridge/bin, packages/client/bin). npm links
// those into node_modules/.bin at `npm ci`, before anything is built, and they keep their committed mode
// (0755) across installs, which files under dist/ do not. Each one loads its workspace's build. When the
// build is missing it runs `npm run build` once (turbo; about a minute on 2 cores) and says so on stderr:
// a first `npx parley-server --help` after `npm ci` works instead of failing. A build it cannot run (no dev
// dependencies, a read-only tree) ends with the command to run by hand.
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
/** The Node.js the repository installs for itself (the `node` dev dependency): used when the caller's is older. */
const bundledNode = fileURLToPath(new URL("../node_modules/node/bin/node", import.meta.url));
const minimumMajor = 22;

/**
 * Runs this command again on the repository's own Node.js when it was started on an older one (a shell whose
 * `node` is the system's Node 20, say), forwarding signals and the exit status. Returns false when no switch
 * is needed or none is possible, and the command goes on where it is.
 */
function rerunOnBundledNode() {
  if (Number(process.versions.node.split(".")[0]) >= minimumMajor || !existsSync(bundledNode)) return false;
  const child = spawn(bundledNode, [...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit" });
  const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const signal of forwarded) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => {
    if (!signal) process.exit(code ?? 1);
    for (const name of forwarded) process.removeAllListeners(name);
    process.kill(process.pid, signal);
  });
  return true;
}

function fail(name, why) {
  process.stderr.write(`${name}: ${why}; run "npm run build" in ${root}, then run ${name} again\n`);
  process.exit(1);
}

/** Imports `entryUrl` (a workspace's dist/ entry), building the repository first when it is missing. */
export async function runBuilt(name, entryUrl) {
  if (rerunOnBundledNode()) return;
  const entry = fileURLToPath(entryUrl);
  if (!existsSync(entry)) {
    process.stderr.write(`${name}: not built yet (${entry} is missing); running "npm run build" in ${root} once\n`);
    // The build's output goes to stderr, so what the command prints on stdout stays clean.
    const result = spawnSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: ["ignore", 2, 2] });
    if (result.error) fail(name, `cannot run npm (${result.error.message})`);
    if (result.status !== 0 || !existsSync(entry)) fail(name, `the build failed (exit ${result.status})`);
  }
  try {
    await import(entryUrl.href);
  } catch (error) {
    // A workspace this one depends on was not built (a partial build): say so instead of a module trace.
    if (error?.code === "ERR_MODULE_NOT_FOUND" && String(error.message).includes("/dist/")) {
      fail(name, `part of the build is missing (${error.message})`);
    }
    throw error;
  }
}
