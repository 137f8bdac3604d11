import { fileURLToPath } from "node:url";
import base from "../../vitest.base.ts";
import { withSlowSpecs } from "../../vitest.quick.ts";

/** Specs that need PostgreSQL, Chromium, Python or root: left out of npm run test:quick (see vitest.quick.ts). */
const slowSpecs: string[] = [];

export default withSlowSpecs(base, fileURLToPath(new URL(".", import.meta.url)), slowSpecs);
