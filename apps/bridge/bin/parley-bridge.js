#!/usr/bin/env node
// The parley-bridge command: committed (mode 0755) so npm can link it at `npm ci`, before dist/ exists.
import { runBuilt } from "../../../scripts/run-built.mjs";

await runBuilt("parley-bridge", new URL("../dist/main.js", import.meta.url));
