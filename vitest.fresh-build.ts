import { existsSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { sourceDigest, stampFile } from "./scripts/build-stamp.mjs";

interface Manifest {
  readonly name: string;
  readonly workspaces?: string[];
  readonly dependencies?: Record<string, string>;
  readonly devDependencies?: Record<string, string>;
}

const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as Manifest;

/**
 * Vitest global setup of every workspace: refuses to run tests against a
 * stale build of the workspace under test or of any workspace it depends on.
 * Tests import the other workspaces through their dist/ (the packages'
 * exports) and spawn binaries from dist/ (parley-server, parley-bridge, the
 * parley CLI), so a dist/ built from other sources than src/ would test old
 * code while reporting green. Only those workspaces: turbo runs a
 * workspace's tests once it and its dependencies are built, not all of them.
 */
export default function checkFreshBuild(): void {
  const root = fileURLToPath(new URL(".", import.meta.url));
  const byName = new Map<string, string>();
  for (const workspace of manifest(root).workspaces ?? []) byName.set(manifest(join(root, workspace)).name, workspace);
  const current = relative(root, resolve(process.cwd()));
  const needed = new Set<string>();
  const visit = (workspace: string) => {
    if (needed.has(workspace)) return;
    needed.add(workspace);
    const m = manifest(join(root, workspace));
    for (const dep of Object.keys({ ...m.dependencies, ...m.devDependencies })) {
      const dir = byName.get(dep);
      if (dir !== undefined) visit(dir);
    }
  };
  if ([...byName.values()].includes(current)) visit(current);
  else for (const workspace of byName.values()) visit(workspace);
  const stale: string[] = [];
  for (const workspace of needed) {
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
