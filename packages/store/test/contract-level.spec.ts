import { createStore } from "../src/index.js";
import { replicaContract } from "./contract-replicas.js";
import { storeContract } from "./contract-suite.js";
import { tempDir } from "./helpers.js";

const open = async ({ now }: { now?: () => number }) => createStore({ url: await tempDir(), ...(now ? { now } : {}) });

storeContract("LevelDB", open);
// The server runs the same lease and event-log code on both backends: LevelDB's in-process leases and durable
// event log keep the same contract as PostgreSQL's.
replicaContract("LevelDB (in-process leases, durable event log)", open);
