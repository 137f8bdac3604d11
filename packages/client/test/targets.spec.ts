import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadClientConfig, parseTarget, UsageError } from "../src/index.js";
import { tempDir } from "./harness.js";

const dir = tempDir("parley-client-config-");
afterAll(() => dir.remove());

describe("parseTarget", () => {
  it("classifies every kind of reference without looking anything up", () => {
    expect(parseTarget("bob")).toEqual({ kind: "name", name: "bob" });
    expect(parseTarget("a2a:bob")).toEqual({ kind: "peer", name: "bob" });
    expect(parseTarget("a2a:ctx-1")).toEqual({ kind: "thread", contextId: "ctx-1" });
    expect(parseTarget("agent:echo")).toEqual({ kind: "agent", name: "echo" });
    expect(parseTarget("ctx-42")).toEqual({ kind: "thread", contextId: "ctx-42" });
    expect(parseTarget("https://a.example/rpc")).toEqual({
      kind: "url",
      url: "https://a.example/rpc",
      protocol: "jsonrpc",
    });
    expect(parseTarget("grpc://10.0.0.5:8081")).toEqual({ kind: "url", url: "http://10.0.0.5:8081", protocol: "grpc" });
    expect(parseTarget("http://h:1/", { protocol: "grpc" })).toEqual({
      kind: "url",
      url: "http://h:1",
      protocol: "grpc",
    });
  });

  it("rejects malformed references with a usage error that says why", () => {
    expect(() => parseTarget(" ")).toThrow(UsageError);
    expect(() => parseTarget("a2a:")).toThrow(/names no peer/);
    expect(() => parseTarget("ws://x")).toThrow(/unsupported URL scheme "ws:\/\/"/);
  });
});

describe("loadClientConfig", () => {
  it("reads peers and lets flags win over the environment and the file", () => {
    const path = join(dir.path, "ok.json");
    writeFileSync(
      path,
      JSON.stringify({ server: "http://file:1", token: "file", peers: { bob: { url: "http://b/" } } }),
    );
    const config = loadClientConfig({ path, env: { PARLEY_TOKEN: "env" }, overrides: { server: "http://flag:2" } });
    expect(config).toMatchObject({ path, server: "http://flag:2", token: "env", protocol: "connect" });
    expect(config.peers.bob).toEqual({ url: "http://b/", protocol: "jsonrpc" });
  });

  it("names the file and the field that is wrong", () => {
    const bad = (name: string, content: string) => {
      const path = join(dir.path, name);
      writeFileSync(path, content);
      return () => loadClientConfig({ path, env: {} });
    };
    expect(bad("json.json", "{")).toThrow(/json\.json is not valid JSON/);
    expect(bad("proto.json", JSON.stringify({ peers: { x: { url: "u", protocol: "smtp" } } }))).toThrow(
      /peers\.x\.protocol: unknown protocol "smtp"/,
    );
    expect(bad("ctx.json", JSON.stringify({ peers: { "ctx-a": { url: "u" } } }))).toThrow(ConfigError);
  });

  it("treats a missing default file as an empty config", () => {
    const config = loadClientConfig({ env: { HOME: dir.path } });
    expect(config).toMatchObject({ path: undefined, server: "http://127.0.0.1:8081", peers: {} });
  });
});
