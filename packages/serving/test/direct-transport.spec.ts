import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { A2AService, AccessService } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { createDirectTransport } from "../src/direct-transport.js";

describe("the in-process transport", () => {
  it("refuses a method this server does not implement with UNIMPLEMENTED, before any interceptor runs", async () => {
    const seen: string[] = [];
    const recording: Interceptor = (next) => async (req) => {
      seen.push(req.method.name);
      return next(req);
    };
    const access = { getCaller: async () => ({}) };
    const transport = createDirectTransport(
      new Map([[AccessService.typeName, { service: AccessService, impl: access }]]),
      [recording],
    );
    const error = await createClient(A2AService, transport)
      .getTask({ id: "x" })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(error?.code).toBe(Code.Unimplemented);
    expect(error?.rawMessage).toBe("lf.a2a.v1.A2AService.getTask has no implementation on this server");
    expect(seen).toEqual([]);
    await createClient(AccessService, transport).getCaller({});
    expect(seen).toEqual(["GetCaller"]);
  });
});
