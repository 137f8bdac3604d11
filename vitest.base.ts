import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/** The test settings every workspace shares; each package's vitest.config.ts re-exports them. */
export default defineConfig({
  test: {
    environment: "node",
    include: ["src/**/*.spec.ts", "test/**/*.spec.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Every workspace's dist/ must be built from its current src/ (see vitest.fresh-build.ts).
    globalSetup: [fileURLToPath(new URL("./vitest.fresh-build.ts", import.meta.url))],
  },
});
