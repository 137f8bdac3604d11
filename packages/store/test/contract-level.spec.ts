import { createStore } from "../src/index.js";
import { storeContract } from "./contract-suite.js";
import { tempDir } from "./helpers.js";

storeContract("LevelDB", async ({ now }) => createStore({ url: await tempDir(), ...(now ? { now } : {}) }));
