// Shared by the committed bin entries (packages/server/bin, apps/bridge/bin, packages/client/bin). npm links
// those into node_modules/.bin at `npm ci`, before anything is built, and they keep their committed mode
// (0755) across installs, which files under dist/ do not. Each one loads its workspace's build. When the
// build is missing it runs `npm run build` once (turbo; about a minute on 2 cores) and says so on stderr:
// a first `npx parley-server --help` after `npm ci` works instead of failing. A build it cannot run (no dev
// dependencies, a read-only tree) ends with the command to run by hand.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

function fail(name, why) {
  process.stderr.write(`${name}: ${why}; run "npm run build" in ${root}, then run ${name} again\n`);
  process.exit(1);
}

/** Imports `entryUrl` (a workspace's dist/ entry), building the repository first when it is missing. */
export async function runBuilt(name, entryUrl) {
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
