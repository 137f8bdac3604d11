// Writes a full bench run's summary (machine, main table, targets) into docs/benchmarks.md between its markers, so
// the documentation shows the latest run's figures and nothing else of the file is touched.
import { replaceSection } from "../../scripts/docs-section.mjs";

export const benchmarksDoc = new URL("../../docs/benchmarks.md", import.meta.url);

/** Replaces the table section of `file` (docs/benchmarks.md by default) with `summary`. */
export function writeBenchDocs(summary, file = benchmarksDoc) {
  replaceSection(file, "<!-- bench-table:start", "<!-- bench-table:end -->", summary);
}
