// Preloaded into a spawned bridge by spawnBridge({ collectGarbageOnSignal: true }) (with --expose-gc): on SIGUSR2
// the process runs a full garbage collection and says so on stderr, so a memory test compares live heaps, not
// heaps that hold whatever garbage V8 had not collected yet when it looked (an idle process may not collect for
// minutes). The bridge itself does not handle SIGUSR2.
process.on("SIGUSR2", () => {
  globalThis.gc();
  process.stderr.write("gc-on-signal: collected\n");
});
