// CPU time of processes read from /proc, and the PostgreSQL processes that work for one
// database, so a benchmark can charge a database-backed server for its database's work.
import { readFileSync } from "node:fs";

const clockTick = 100; // USER_HZ on Linux: /proc/<pid>/stat counts CPU in 1/100 s.

/** utime + stime of a process in ms; 0 once it is gone, so a backend that exits mid-run only undercounts. */
export function cpuMsOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTick;
  } catch {
    return 0;
  }
}

/** The PostgreSQL processes that work for a database: its backends plus the WAL writer and friends. */
export async function pgPids(query, dbName) {
  const { rows } = await query(
    "SELECT pid FROM pg_stat_activity WHERE datname = $1 OR backend_type IN ('walwriter', 'checkpointer', 'background writer')",
    [dbName],
  );
  return rows.map((r) => r.pid);
}

/** A CPU meter over a database's processes: mark() starts a window, read() gives its ms. */
export function createPgCpuMeter(query, dbName) {
  let before = new Map();
  return {
    async mark() {
      before = new Map((await pgPids(query, dbName)).map((pid) => [pid, cpuMsOf(pid)]));
    },
    async read() {
      let ms = 0;
      for (const pid of await pgPids(query, dbName)) ms += cpuMsOf(pid) - (before.get(pid) ?? 0);
      return ms;
    },
  };
}
