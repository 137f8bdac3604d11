import { createStore } from "../src/index.js";
import { storeContract } from "./contract-suite.js";
import { tempDir } from "./helpers.js";

storeContract("LevelDB with in-process leases and event logs", async ({ now }) =>
  createStore({ url: await tempDir(), ...(now ? { now } : {}) }),
);
