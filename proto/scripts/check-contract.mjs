// Fails when the committed generated code and proto/ disagree, or when proto/
// breaks wire compatibility with what main already has.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: "pipe", encoding: "utf8" });

function listFiles(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

const scratch = mkdtempSync(join(tmpdir(), "parley-gen-"));
try {
  run("npx", ["buf", "generate", "--output", scratch]);
  const fresh = join(scratch, "src/gen");
  const committed = join(root, "src/gen");
  const a = listFiles(fresh);
  const b = listFiles(committed);
  const drift = [...new Set([...a, ...b])].filter(
    (f) =>
      !a.includes(f) ||
      !b.includes(f) ||
      readFileSync(join(fresh, f), "utf8") !== readFileSync(join(committed, f), "utf8"),
  );
  if (drift.length > 0) {
    console.error(`generated code is out of date with proto/ (run \`npm run generate\`): ${drift.join(", ")}`);
    process.exit(1);
  }
  console.log(`generated code matches proto/ (${a.length} files)`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

let mainHasProto = false;
try {
  run("git", ["cat-file", "-e", "main:proto/buf.yaml"]);
  mainHasProto = true;
} catch {
  console.log("buf breaking skipped: main has no proto/ yet");
}
if (mainHasProto) {
  try {
    run("npx", ["buf", "breaking", "--against", "../.git#branch=main,subdir=proto"]);
    console.log("buf breaking: no breaking change against main");
  } catch (error) {
    console.error(`buf breaking found changes that break main's contract:\n${error.stdout ?? ""}${error.stderr ?? ""}`);
    process.exit(1);
  }
}
