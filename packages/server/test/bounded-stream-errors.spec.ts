import { Code, createClient } from "@connectrpc/connect";
import { A2AService, ErrorInfoSchema } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { maxErrorMessageChars, maxErrorMetadataChars } from "../src/interceptors/caller-interceptor.js";
import { failure, startTestServer, type TestServer } from "./harness.js";

describe("a stream's failure that quotes a long request", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it("reaches the caller with its message and ErrorInfo metadata cut, in process and over gRPC", async () => {
    const id = "x".repeat(5000);
    const clients = [createClient(A2AService, server.parley.inProcessTransport()), server.a2a("grpc")];
    for (const client of clients) {
      const error = await failure(async () => {
        for await (const _ of client.subscribeToTask({ id }, { headers: { "a2a-version": "1.0" } }));
      });
      expect(error.code).toBe(Code.NotFound);
      expect(error.rawMessage.length).toBeLessThan(maxErrorMessageChars + 50);
      expect(error.rawMessage).toMatch(/more characters\)$/);
      const info = error.findDetails(ErrorInfoSchema)[0];
      expect(info?.reason).toBe("TASK_NOT_FOUND");
      expect(info?.metadata.taskId?.length).toBeLessThan(maxErrorMetadataChars + 50);
    }
  });
});
