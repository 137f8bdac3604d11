// What V8's garbage collector did in a server while a row was measured, from the GCs' own record (v8.GCProfiler:
// each GC's kind, its pause on the JavaScript thread and the heap's spaces before and after it). The work V8's
// helper threads did alongside is not in it: that shows as the CPU a row spent outside its JavaScript thread.
import { GCProfiler, getHeapSpaceStatistics } from "node:v8";

const YOUNG = new Set(["new_space", "new_large_object_space"]);
const OLD = new Set(["old_space", "large_object_space"]);

/** Bytes used in the named spaces; GCProfiler names the fields in camelCase, v8.getHeapSpaceStatistics in snake_case. */
function used(spaces, names) {
  let bytes = 0;
  for (const s of spaces) if (names.has(s.spaceName ?? s.space_name)) bytes += s.spaceUsedSize ?? s.space_used_size;
  return bytes;
}

/**
 * Starts recording; `stop()` sums the GCs since. Young-generation allocation is what filled the young generation
 * between GCs; `copiedBytes` what each scavenge found alive there (the scavenges' work follows it);
 * `promotedBytes` what scavenges moved to the old generation, which mark-compacts then have to trace.
 */
export function startGcRecord() {
  const profiler = new GCProfiler();
  const youngAtStart = used(getHeapSpaceStatistics(), YOUNG);
  profiler.start();
  return {
    stop() {
      const { statistics } = profiler.stop();
      const youngAtEnd = used(getHeapSpaceStatistics(), YOUNG);
      const sum = {
        scavenges: 0,
        scavengeUs: 0,
        markCompacts: 0,
        markCompactUs: 0,
        allocatedBytes: 0,
        copiedBytes: 0,
        promotedBytes: 0,
      };
      let youngAfter = youngAtStart;
      for (const gc of statistics) {
        const before = gc.beforeGC.heapSpaceStatistics;
        const after = gc.afterGC.heapSpaceStatistics;
        sum.allocatedBytes += Math.max(0, used(before, YOUNG) - youngAfter);
        youngAfter = used(after, YOUNG);
        if (gc.gcType === "Scavenge") {
          sum.scavenges++;
          sum.scavengeUs += gc.cost;
          sum.copiedBytes += youngAfter;
          sum.promotedBytes += Math.max(0, used(after, OLD) - used(before, OLD));
        } else if (gc.gcType === "MarkSweepCompact" || gc.gcType === "IncrementalMarking") {
          // IncrementalMarking: the steps of a mark-compact's marking done on the JavaScript thread before its pause.
          if (gc.gcType === "MarkSweepCompact") sum.markCompacts++;
          sum.markCompactUs += gc.cost;
        }
      }
      sum.allocatedBytes += Math.max(0, youngAtEnd - youngAfter);
      return sum;
    },
  };
}
