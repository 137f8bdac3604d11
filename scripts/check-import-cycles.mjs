// Fails when hand-written TypeScript under proto/, packages/ or apps/ imports itself in a circle
// (relative imports, type-only ones included: a type circle still ties two modules' designs together).
// node scripts/check-import-cycles.mjs [root...]
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const roots = process.argv.length > 2 ? process.argv.slice(2) : ["proto/src", "packages", "apps"];
const skip = new Set(["node_modules", "dist", "gen", "test"]);

function* sources(dir) {
  for (const name of readdirSync(dir)) {
    if (skip.has(name) || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts") && !name.endsWith(".spec.ts")) yield resolve(path);
  }
}

const importPattern = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"(\.{1,2}\/[^"]+)"/g;
const graph = new Map();
for (const root of roots) {
  for (const file of sources(root)) {
    const edges = [];
    for (const match of readFileSync(file, "utf8").matchAll(importPattern)) {
      edges.push(resolve(dirname(file), match[1].replace(/\.js$/, ".ts")));
    }
    graph.set(file, edges);
  }
}

// Tarjan's strongly connected components: every component of more than one module is a circle.
let index = 0;
const stack = [];
const state = new Map();
const circles = [];
function visit(node) {
  const s = { index, low: index, onStack: true };
  index++;
  state.set(node, s);
  stack.push(node);
  for (const next of graph.get(node) ?? []) {
    if (!graph.has(next)) continue;
    const t = state.get(next);
    if (!t) {
      visit(next);
      s.low = Math.min(s.low, state.get(next).low);
    } else if (t.onStack) s.low = Math.min(s.low, t.index);
  }
  if (s.low === s.index) {
    const component = [];
    let member;
    do {
      member = stack.pop();
      state.get(member).onStack = false;
      component.push(member);
    } while (member !== node);
    const selfLoop = (graph.get(node) ?? []).includes(node);
    if (component.length > 1 || selfLoop) circles.push(component);
  }
}
for (const node of graph.keys()) if (!state.has(node)) visit(node);

if (circles.length > 0) {
  for (const c of circles)
    process.stderr.write(`import circle: ${c.map((f) => relative(process.cwd(), f)).join(" <-> ")}\n`);
  process.exit(1);
}
process.stdout.write(`no import circle in ${graph.size} modules (${roots.join(", ")})\n`);
