import { fileURLToPath } from "node:url";
import base from "../../vitest.base.ts";
import { withSlowSpecs } from "../../vitest.quick.ts";

/** Specs that need PostgreSQL, Chromium, Python or root: left out of npm run test:quick (see vitest.quick.ts). */
const slowSpecs = [
  "test/cut-turns.spec.ts",
  "test/sessions-stored.spec.ts",
  "test/thread-delete-crash.spec.ts",

  "test/operations-health.spec.ts",
  "test/recovery-states.spec.ts",
  "test/retention.spec.ts",
  "test/retention-crash.spec.ts",
  "test/scale-out-pg-restart.spec.ts",
  "test/scale-out-replicas.spec.ts",
  "test/scale-out-round-trips.spec.ts",
];

export default withSlowSpecs(base, fileURLToPath(new URL(".", import.meta.url)), slowSpecs);
