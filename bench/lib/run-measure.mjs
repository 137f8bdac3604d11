// One measured row of bench/run.mjs: the load generator drives a server while its CPU, GC, LevelDB group commit
// and (on PostgreSQL) database CPU are read around the measured phase.

/** measure(server, row): runs the row's load against the server and returns the row with its figures. */
export function createMeasure(load, settings) {
  return async function measure(server, row) {
    const spec = {
      ...row.spec,
      warmupMs: settings.warmupMs,
      durationMs: settings.measureMs,
      maxRequests: settings.maxRequests,
      concurrency: settings.concurrency,
      ...row.overrides,
    };
    let before;
    let commitsBefore;
    // A --base checkout's servers may predate the GC record: their rows then have no GC figures.
    let gcMarked = false;
    const afterWarmup = async () => {
      if (server.info.afterWarmup) await server.request("afterWarmup");
      if (server.info.dbCpu) await server.request("dbCpuMark");
      if (server.info.commits) commitsBefore = await server.request("commits");
      gcMarked = await server.request("gcMark").then(
        () => true,
        () => false,
      );
      before = await server.request("cpu");
    };
    const result = await load.request("run", { spec }, { phase: afterWarmup });
    const after = await server.request("cpu");
    const gc = gcMarked ? await server.request("gcRead") : undefined;
    // LevelDB's group commit during the measured part: writes, batches and fsyncs per request.
    const commitsAfter = commitsBefore ? await server.request("commits") : undefined;
    const perRequest = (field) =>
      commitsAfter && result.requests ? (commitsAfter[field] - commitsBefore[field]) / result.requests : undefined;
    const dbCpuMs = server.info.dbCpu ? await server.request("dbCpuRead") : undefined;
    const cpuMs = (after.usage.user + after.usage.system - before.usage.user - before.usage.system) / 1000;
    const mainMs =
      after.mainMs !== undefined && before.mainMs !== undefined ? after.mainMs - before.mainMs : Number.NaN;
    return {
      ...row,
      ...result,
      cpuMsPerRequest: result.requests ? cpuMs / result.requests : Number.NaN,
      // The JavaScript thread's part of cpuMsPerRequest; the rest ran on the process's other threads.
      mainMsPerRequest: result.requests ? mainMs / result.requests : Number.NaN,
      // The load generator's CPU per request (the one process that drives every row).
      loadCpuMsPerRequest:
        result.requests && result.loadCpuMs !== undefined ? result.loadCpuMs / result.requests : undefined,
      dbCpuMsPerRequest: dbCpuMs !== undefined && result.requests ? dbCpuMs / result.requests : undefined,
      commits: commitsAfter
        ? { writes: perRequest("writes"), batches: perRequest("batches"), fsyncs: perRequest("synced") }
        : undefined,
      concurrency: spec.concurrency,
      serverCpuShare: cpuMs / result.elapsedMs,
      gc,
    };
  };
}
