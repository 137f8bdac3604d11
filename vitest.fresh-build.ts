import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sourceDigest, stampFile } from "./scripts/build-stamp.mjs";

/**
 * Vitest global setup of every workspace: refuses to run tests against a
 * stale build. Tests import the other workspaces through their dist/ (the
 * packages' exports) and spawn binaries from dist/ (parley-server,
 * parley-bridge, the parley CLI), so a dist/ built from other sources than
 * src/ would test old code while reporting green.
 */
export default function checkFreshBuild(): void {
  const root = fileURLToPath(new URL(".", import.meta.url));
  const { workspaces } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { workspaces: string[] };
  const stale: string[] = [];
  for (const workspace of workspaces) {
    const dir = join(root, workspace);
    const stamp = join(dir, stampFile);
    const built = existsSync(stamp) ? readFileSync(stamp, "utf8").trim() : "(no build)";
    if (built !== sourceDigest(dir)) stale.push(workspace);
  }
  if (stale.length > 0) {
    throw new Error(
      `the build of ${stale.join(", ")} does not match its src/ (edited since the last build, or never built): run \`npm run build\` at the repository root first`,
    );
  }
}
