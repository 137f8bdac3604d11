import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const binDir = "/usr/lib/postgresql/15/bin";

/**
 * A throwaway PostgreSQL 15 instance of one test file, so the file can stop
 * and restart "the database" without touching the machine's shared cluster.
 * PostgreSQL refuses to run as root: as root its binaries run as `postgres`.
 */
export interface PrivatePostgres {
  readonly url: string;
  readonly port: number;
  /** `pg_ctl restart -m fast -w`: every connection is cut, the server is back when this resolves. */
  restart(): Promise<void>;
  /** `pg_ctl stop -m fast -w`: a longer outage than a restart, ended by start(). */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the instance (if running) and removes its files. */
  destroy(): Promise<void>;
  log(): string;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all([run("id", ["-u", "postgres"]), run("id", ["-g", "postgres"])]);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const initdb = join(binDir, "initdb");
  if (!existsSync(initdb)) {
    throw new Error(
      `this test needs its own PostgreSQL 15 instance, but ${initdb} is missing: install the Debian package postgresql-15 (it provides initdb and pg_ctl in ${binDir})`,
    );
  }
  const asRoot = process.getuid?.() === 0;
  const exec = async (tool: string, args: string[]) => {
    const [cmd, argv] = asRoot
      ? ["runuser", ["-u", "postgres", "--", join(binDir, tool), ...args]]
      : [join(binDir, tool), args];
    try {
      return await run(cmd, argv, { timeout: 60_000 });
    } catch (error) {
      const e = error as Error & { stderr?: string; stdout?: string };
      throw new Error(`${tool} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}${e.stderr ?? ""}`);
    }
  };
  const base = mkdtempSync(join(tmpdir(), "parley-pg-"));
  if (asRoot) {
    const { uid, gid } = await postgresIds();
    chownSync(base, uid, gid);
  }
  const data = join(base, "data");
  const logFile = join(base, "postgres.log");
  const port = await freePort();
  // The socket goes into the instance's own directory, so nothing is left in /tmp.
  const serverOptions = `-p ${port} -k ${base} -c listen_addresses=127.0.0.1 -c fsync=off`;
  let running = false;
  try {
    await exec("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-N", "-E", "UTF8"]);
    await exec("pg_ctl", ["-D", data, "-l", logFile, "-o", serverOptions, "-w", "start"]);
    running = true;
  } catch (error) {
    rmSync(base, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async restart() {
      await exec("pg_ctl", ["-D", data, "-l", logFile, "-o", serverOptions, "-m", "fast", "-w", "restart"]);
    },
    async stop() {
      await exec("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]);
      running = false;
    },
    async start() {
      await exec("pg_ctl", ["-D", data, "-l", logFile, "-o", serverOptions, "-w", "start"]);
      running = true;
    },
    async destroy() {
      if (running) await exec("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {});
      running = false;
      rmSync(base, { recursive: true, force: true });
    },
    log: () => (existsSync(logFile) ? readFileSync(logFile, "utf8") : ""),
  };
}
