import { randomBytes } from "node:crypto";
import pg from "pg";

const defaultUrl = "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * The admin URL of the test server: PARLEY_TEST_PG_URL, or the local cluster
 * that `npm test`'s pretest step starts (scripts/test-prerequisites.sh).
 */
export function adminUrl(): string {
  return process.env.PARLEY_TEST_PG_URL || defaultUrl;
}

/** A database of one test file's own. */
export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  /** Removes it, closing whatever still uses it. */
  drop(): Promise<void>;
}

/** Creates a fresh database for one test file (used by the server, bridge and client tests too). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = adminUrl();
  const name = `parley_t_${randomBytes(6).toString("hex")}`;
  const client = new pg.Client({ connectionString: admin });
  try {
    await client.connect();
  } catch (cause) {
    throw new Error(
      `PostgreSQL is unreachable at ${admin} (${(cause as Error).message}); start it, or set PARLEY_TEST_PG_URL`,
      { cause },
    );
  }
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
