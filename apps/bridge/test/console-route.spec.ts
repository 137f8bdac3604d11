import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleFileOf, createConsoleRoute } from "../src/console-route.js";
import { startStack, type TestStack } from "./harness.js";
import { type RawResponse, rawExchange } from "./raw-http.js";

const secret = "the secret next door";

describe("the console's static files at /console/", () => {
  let stack: TestStack;
  let root: string;
  let dist: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "parley-console-route-"));
    dist = join(root, "dist");
    mkdirSync(join(dist, "assets"), { recursive: true });
    writeFileSync(join(dist, "index.html"), "<!doctype html><title>console</title>");
    writeFileSync(join(dist, "assets", "index-abc123.js"), "console.log(1)");
    writeFileSync(join(dist, "assets", "index-abc123.css"), "body{}");
    writeFileSync(join(dist, ".env"), secret);
    writeFileSync(join(root, "secret.txt"), secret);
    stack = await startStack({}, { routes: [createConsoleRoute({ dir: dist })] });
  });
  afterAll(async () => {
    await stack.close();
    rmSync(root, { recursive: true, force: true });
  });

  const get = (path: string, headers: [string, string][] = [], method = "GET") =>
    rawExchange(stack.bridge.port, { method, path, headers, body: Buffer.alloc(0), mode: "whole" }).then((o) => {
      if (!("response" in o)) throw new Error(`no response for ${path}: ${o.closed}`);
      return o.response;
    });
  const text = (r: RawResponse) => r.body.toString();

  it("serves index.html revalidated and hashed assets cached for a year, with their content types", async () => {
    const index = await get("/console/");
    expect(index.status).toBe(200);
    expect(index.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(index.headers["cache-control"]).toBe("no-cache");
    expect(index.headers["content-security-policy"]).toContain("default-src 'self'");
    expect(index.headers["x-content-type-options"]).toBe("nosniff");
    expect(text(index)).toContain("<title>console</title>");
    const js = await get("/console/assets/index-abc123.js");
    expect([js.status, js.headers["content-type"], js.headers["cache-control"]]).toEqual([
      200,
      "text/javascript; charset=utf-8",
      "public, max-age=31536000, immutable",
    ]);
    expect((await get("/console/assets/index-abc123.css")).headers["content-type"]).toBe("text/css; charset=utf-8");
    const head = await get("/console/assets/index-abc123.js", [], "HEAD");
    expect([head.status, head.headers["content-length"], head.body.length]).toEqual([200, "14", 0]);
  });

  it("redirects /console to /console/, answers views with index.html and missing files with 404", async () => {
    const bare = await get("/console");
    expect([bare.status, bare.headers.location]).toEqual([308, "/console/"]);
    const view = await get("/console/threads/ctx-123");
    expect([view.status, text(view)]).toEqual([200, "<!doctype html><title>console</title>"]);
    const missing = await get("/console/assets/gone-1.js");
    expect(missing.status).toBe(404);
    expect(text(missing)).toContain("no file");
  });

  it("answers an unchanged file with 304 and refuses other methods with 405", async () => {
    const first = await get("/console/assets/index-abc123.js");
    const again = await get("/console/assets/index-abc123.js", [["If-None-Match", first.headers.etag!]]);
    expect([again.status, again.body.length]).toEqual([304, 0]);
    const post = await get("/console/", [], "POST");
    expect([post.status, post.headers.allow]).toEqual([405, "GET, HEAD"]);
  });

  it("never reads outside its directory nor a hidden file, however the path is spelled", async () => {
    const attempts = [
      "/console/../secret.txt",
      "/console/%2e%2e/secret.txt",
      "/console/..%2fsecret.txt",
      "/console/%2e%2e%2fsecret.txt",
      "/console/assets/..%5c..%5csecret.txt",
      "/console/.env",
      "/console/%2eenv",
      "/console/a%00b",
      "/console/%E0%A4%A",
    ];
    for (const path of attempts) {
      const res = await get(path);
      expect(text(res), path).not.toContain(secret);
      expect([400, 404], `${path} -> ${res.status}`).toContain(res.status);
    }
  });

  it("maps request paths to files only inside the root", () => {
    expect(consoleFileOf("/srv/c", "/console/assets/a.js")).toBe("/srv/c/assets/a.js");
    expect(consoleFileOf("/srv/c", "/console/")).toBe("/srv/c");
    expect(consoleFileOf("/srv/c", "/console/..%2f..%2fetc%2fpasswd")).toBeUndefined();
    expect(consoleFileOf("/srv/c", "/console/%2e%2e")).toBeUndefined();
    expect(consoleFileOf("/srv/c", "/console/x%5cy")).toBeUndefined();
  });
});
