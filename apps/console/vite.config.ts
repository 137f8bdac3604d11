import { defineConfig } from "vite";

// The bridge serves the build at /console/; assets/ holds content-hashed files it caches for a year.
export default defineConfig({
  base: "/console/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: true,
    reportCompressedSize: false,
  },
  server: {
    // `npm run dev`: the page from Vite, the RPCs from a bridge started with `npm start`.
    proxy: { "^/(lf\\.a2a\\.v1|parley\\.v1)\\.": "http://127.0.0.1:8080" },
  },
});
