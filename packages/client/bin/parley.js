#!/usr/bin/env node
// The parley command: committed (mode 0755) so npm can link it at `npm ci`, before dist/ exists.
import { runBuilt } from "../../../scripts/run-built.mjs";

await runBuilt("parley", new URL("../dist/cli.js", import.meta.url));
