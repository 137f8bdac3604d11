import { execFile } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startServer, type TestServer, tempDir } from "./harness.js";

const run = promisify(execFile);
const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const pythonDir = join(repo, "clients/python");
const buf = join(repo, "node_modules/.bin/buf");
const install = "apt-get install -y protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf";

/** The first python3 that has grpc and protobuf (a pyenv shim may shadow Debian's). */
async function findPython(): Promise<string | undefined> {
  for (const candidate of ["python3", "/usr/bin/python3"]) {
    try {
      await run(candidate, ["-c", "import grpc, google.protobuf"]);
      return candidate;
    } catch {
      // The next candidate may have the modules.
    }
  }
  return undefined;
}

let server: TestServer;
const out = tempDir("parley-python-gen-");

beforeAll(async () => {
  server = await startServer({ PARLEY_ECHO_INPUT: "framed" });
});

afterAll(async () => {
  await server.close();
  out.remove();
});

it("a Python gRPC client generated with buf keeps a two-turn thread", async () => {
  const python = await findPython();
  const plugin = await run("which", ["grpc_python_plugin"]).then(
    () => true,
    () => false,
  );
  if (!python || !plugin) {
    const missing = [!python && "python3 with grpc and protobuf", !plugin && "grpc_python_plugin"].filter(Boolean);
    throw new Error(
      `the Python proof needs ${missing.join(" and ")}; install them with: ${install}` +
        (process.env.CI ? " (.ci/run installs them before npm ci)" : ""),
    );
  }
  await run(buf, ["generate", "-o", out.path], { cwd: pythonDir });
  const address = server.baseUrl.replace(/^http:\/\//, "");
  const { stdout } = await run(python, [join(pythonDir, "two_turns.py"), address, join(out.path, "gen")]);
  expect(stdout).toContain("ok: the second turn saw the first inside the guard block");
  expect(stdout).toMatch(/context ctx-/);
});
