import { createHash, randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The file in the data dir that keeps a generated server id across restarts. */
export const serverIdFile = "parley-server-id";

const serverIdPattern = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

/**
 * This server's stable id in chain traces: `serverId` from the config when
 * set; for replicas sharing PostgreSQL one id derived from the database URL
 * (its credentials left out), so every replica of the same server is the same
 * hop; otherwise an id generated once and kept in the data dir.
 */
export function resolveServerId(config: {
  readonly serverId: string;
  readonly storeUrl: string;
  readonly dataDir: string;
}): string {
  if (config.serverId !== "") {
    if (!serverIdPattern.test(config.serverId)) {
      throw new Error(
        `config: serverId ${JSON.stringify(config.serverId)} must be 1-128 of [A-Za-z0-9._:@-], starting with a letter or digit`,
      );
    }
    return config.serverId;
  }
  if (config.storeUrl !== "") {
    const url = new URL(config.storeUrl);
    url.username = "";
    url.password = "";
    return `parley-${createHash("sha256").update(url.toString()).digest("hex").slice(0, 16)}`;
  }
  const file = join(config.dataDir, serverIdFile);
  try {
    const stored = readFileSync(file, "utf8").trim();
    if (serverIdPattern.test(stored)) return stored;
    throw new Error(
      `${file} holds no valid server id (${JSON.stringify(stored.slice(0, 40))}); delete it or set serverId`,
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const generated = `parley-${randomUUID()}`;
  // wx: two processes starting on one data dir cannot both write an id.
  writeFileSync(file, `${generated}\n`, { flag: "wx" });
  return generated;
}
