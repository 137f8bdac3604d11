// Fails when an import runs back up a floor: between workspaces (by package.json dependencies and by the
// @parley/* specifiers in src/), or between the folders of a layered package (by relative imports in src/).
// Each floor may import only floors below it; a folder may import itself. Tests are not layered.
// node scripts/check-layers.mjs          check, and check that docs/architecture.md shows the current drawing
// node scripts/check-layers.mjs --write  also rewrite that drawing
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Workspaces bottom to top; one floor may hold several, which must not import each other. */
const workspaceFloors = [
  ["proto"],
  ["packages/store"],
  ["packages/serving", "packages/domain"],
  ["packages/server"],
  ["packages/client", "apps/console"],
  ["apps/bridge"],
];

/**
 * Folders (or top-level files) of the layered packages bottom to top. A unit not named here fails the check, so a
 * new folder has to be given its floor.
 */
const unitFloors = {
  "packages/serving": [
    ["grpc-status", "call-context"],
    ["interceptors"],
    ["service-calls"],
    ["direct-transport", "listen"],
    ["index", "internal"],
  ],
  "packages/domain": [
    ["errors", "thread"],
    ["chain"],
    ["agent"],
    ["engine"],
    ["sessions", "replicas"],
    ["index", "internal"],
  ],
  "packages/server": [
    ["logger", "shutdown", "options", "health"],
    ["observability", "limits"],
    ["agents", "push", "retention", "reflection"],
    ["config"],
    ["interceptors", "agent-card", "start-notices", "create-agents"],
    ["services"],
    ["parley"],
    ["main", "index", "internal"],
  ],
};

const importPattern = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/g;

function* sources(dir) {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (name === "gen" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (/\.tsx?$/.test(name) && !/\.(d|spec|test)\.tsx?$/.test(name)) yield path;
  }
}

const floorOf = (floors, name) => floors.findIndex((floor) => floor.includes(name));
const problems = [];

/** Each workspace's package.json, by package name. */
const workspaces = new Map();
for (const dir of workspaceFloors.flat()) {
  const manifest = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8"));
  workspaces.set(manifest.name, { dir, manifest });
}
const dirOf = (name) => workspaces.get(name)?.dir;
const workspaceEdges = new Set();
for (const [name, { dir, manifest }] of workspaces) {
  const from = floorOf(workspaceFloors, dir);
  for (const dep of Object.keys(manifest.dependencies ?? {})) {
    const target = dirOf(dep);
    if (!target) continue;
    workspaceEdges.add(`${dir} -> ${target}`);
    if (floorOf(workspaceFloors, target) >= from)
      problems.push(`${name} depends on ${dep}, which is not on a floor below it`);
  }
  for (const file of sources(join(root, dir, "src"))) {
    for (const [, spec] of readFileSync(file, "utf8").matchAll(importPattern)) {
      const target = dirOf(spec.split("/").slice(0, 2).join("/"));
      if (!target || target === dir) continue;
      if (floorOf(workspaceFloors, target) >= from) {
        problems.push(`${relative(root, file)} imports ${spec}, which is not on a floor below ${name}`);
      }
    }
  }
}

const unitEdges = {};
for (const [dir, floors] of Object.entries(unitFloors)) {
  const src = join(root, dir, "src");
  const unitOf = (file) =>
    relative(src, file)
      .split("/")[0]
      .replace(/\.[jt]s$/, "");
  const edges = new Set();
  unitEdges[dir] = edges;
  for (const file of sources(src)) {
    const unit = unitOf(file);
    const from = floorOf(floors, unit);
    if (from < 0) {
      problems.push(`${relative(root, file)}: ${dir}/src/${unit} has no floor in scripts/check-layers.mjs`);
      continue;
    }
    for (const [, spec] of readFileSync(file, "utf8").matchAll(importPattern)) {
      if (!spec.startsWith(".")) continue;
      const target = unitOf(resolve(dirname(file), spec));
      if (target === unit) continue;
      edges.add(`${unit} -> ${target}`);
      const to = floorOf(floors, target);
      if (to < 0 || to >= from) {
        problems.push(`${relative(root, file)} imports ${spec}: ${target} is not on a floor below ${unit}`);
      }
    }
  }
}

/** The drawing: each floor on a line, top floor first, and the arrows each unit has. */
function drawing() {
  const lines = ["Workspaces (top floor first; each imports only floors below it):", ""];
  for (const floor of [...workspaceFloors].reverse()) {
    lines.push(`  ${floor.map((dir) => dir.padEnd(18)).join("")}`.trimEnd());
    for (const dir of floor) {
      const targets = [...workspaceEdges].filter((e) => e.startsWith(`${dir} -> `)).map((e) => e.split(" -> ")[1]);
      if (targets.length > 0) lines.push(`    ${dir} -> ${targets.sort().join(", ")}`);
    }
  }
  for (const [dir, floors] of Object.entries(unitFloors)) {
    lines.push("", `${dir}/src (top floor first):`, "");
    for (const floor of [...floors].reverse()) {
      if (floor.includes("index")) continue;
      lines.push(`  ${floor.join(", ")}`);
      for (const unit of floor) {
        const targets = [...unitEdges[dir]].filter((e) => e.startsWith(`${unit} -> `)).map((e) => e.split(" -> ")[1]);
        if (targets.length > 0) lines.push(`    ${unit} -> ${targets.sort().join(", ")}`);
      }
    }
  }
  return lines.join("\n");
}

const docPath = join(root, "docs/architecture.md");
const begin = "<!-- layers:begin (scripts/check-layers.mjs --write) -->";
const end = "<!-- layers:end -->";
const doc = readFileSync(docPath, "utf8");
const at = doc.indexOf(begin);
const until = doc.indexOf(end);
if (at < 0 || until < at) problems.push(`docs/architecture.md has no ${begin} ... ${end} block`);
else {
  const current = `${begin}\n\`\`\`\n${drawing()}\n\`\`\`\n${end}`;
  if (doc.slice(at, until + end.length) !== current) {
    if (process.argv.includes("--write"))
      writeFileSync(docPath, doc.slice(0, at) + current + doc.slice(until + end.length));
    else
      problems.push(
        "docs/architecture.md shows an old drawing of the layers: run node scripts/check-layers.mjs --write",
      );
  }
}

if (problems.length > 0) {
  console.error(`${problems.length} import(s) against the layers:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log("no import runs back up a floor (workspaces, and the folders of serving, domain and server)");
