// A throwaway PostgreSQL database for one benchmark server, on the local server
// (BENCH_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres), with a meter
// of the CPU its PostgreSQL processes spend.
import pg from "pg";
import { createPgCpuMeter } from "./pg-cpu.mjs";

export async function createBenchDatabase(prefix, { synchronousCommit = "on" } = {}) {
  const adminUrl = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const name = `${prefix}_${process.pid}`;
  const admin = new pg.Pool({ connectionString: adminUrl, max: 1 });
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  if (synchronousCommit !== "on")
    await admin.query(`ALTER DATABASE ${name} SET synchronous_commit = ${synchronousCommit}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    meter: createPgCpuMeter((text, params) => admin.query(text, params), name),
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}
