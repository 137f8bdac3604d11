// Parley's RPC handler against plain connect-node (see rpc-handler.spec.ts) at the edges of a request: the
// readMaxBytes limit, gzip both ways, bodies that do not decode, and what goes on the wire where the two answer
// differently on purpose (an unknown path, grpc-message).

import * as http2 from "node:http2";
import { create, createFileRegistry, type DescMessage, toBinary } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Type, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { A2AService, GetTaskRequestSchema } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callStream, callUnary, errorView, servedBy } from "./fixtures/call-views.js";
import { grpcEnvelope, h2Post } from "./fixtures/h2-post.js";
import { errorText } from "./fixtures/probe-service.js";
import { readMaxBytes, startTwins, type Twins, wires } from "./fixtures/twin-servers.js";

let twins: Twins;
beforeAll(async () => {
  twins = await startTwins();
});
afterAll(async () => {
  await twins.close();
});

/** GetTaskRequest as a peer built from another contract knows it: its `id` (field 2) an int32. */
const MistypedGetTaskRequest: DescMessage = createFileRegistry(
  create(FileDescriptorProtoSchema, {
    name: "mistyped.proto",
    package: "parley.test",
    syntax: "proto3",
    messageType: [
      {
        name: "MistypedGetTaskRequest",
        field: [{ name: "id", number: 2, type: FieldDescriptorProto_Type.INT32, jsonName: "id" }],
      },
    ],
  }),
  () => undefined,
).getMessage("parley.test.MistypedGetTaskRequest")!;

/** A2AService whose GetTask sends the mistyped request: the same path, a body the server cannot decode. */
const mistypedService = (() => {
  const getTask = { ...A2AService.method.getTask, input: MistypedGetTaskRequest };
  return { ...A2AService, methods: [getTask], method: { getTask } } as unknown as typeof A2AService;
})();

describe.each(wires)("$name", (wire) => {
  const kind = wire.ownRoute ? "parley" : "connect";

  it("refuses a request message over readMaxBytes the same: RESOURCE_EXHAUSTED naming the limit", async () => {
    const [parley, reference] = await twins.both((s) => callUnary(s, wire, `echo:${"x".repeat(readMaxBytes)}`));
    expect(parley).toEqual(reference);
    expect(parley.error?.code).toBe("ResourceExhausted");
    expect(parley.error?.message).toMatch(/is larger than configured readMaxBytes 8192$/);
  });

  it("refuses a stream's request over readMaxBytes the same", async () => {
    const tenant = `count:1:${"x".repeat(readMaxBytes)}`;
    const [parley, reference] = await twins.both((s) => callStream(s, wire, tenant));
    expect(parley.error?.code).toBe("ResourceExhausted");
    expect(parley.error?.message).toMatch(/^message size \d+ is larger than configured readMaxBytes 8192$/);
    expect(parley.messages).toEqual([]);
    if (wire.protocol === "grpc") {
      // Deliberate (grpc-route.ts): refused before its first message, trailers-only, without connect-node's headers.
      expect(parley.header).toEqual({});
      expect(parley.error).toEqual(reference.error);
    } else {
      expect(parley).toEqual(reference);
    }
  });

  it("refuses a body far past the body reader's limit as connect-node refuses it", async () => {
    // Past maxBodyBytes the body reader hands the route the body cut short: it must still say too large.
    const [parley, reference] = await twins.both((s) => callUnary(s, wire, `echo:${"x".repeat(8 * readMaxBytes)}`));
    expect(parley).toEqual(reference);
    expect(parley.error?.code).toBe("ResourceExhausted");
    expect(parley.error?.message).toContain("readMaxBytes 8192");
  });

  it("takes a gzip request and answers gzip the same", async () => {
    const text = "y".repeat(3000);
    const answers = await twins.both((s) => callUnary(s, wire, `echo:${text}`, { gzip: true }));
    const [parley, reference] = [servedBy(answers[0], kind), servedBy(answers[1], "connect")];
    expect(parley).toEqual(reference);
    expect(parley.messages).toEqual([{ id: "echo", contextId: text }]);
    // The handler saw the request come compressed; the answer names its own compression.
    expect(parley.header["x-request-encoding"]).toBe("gzip");
    const encoding = wire.protocol === "connect" ? "content-encoding" : "grpc-encoding";
    expect(parley.header[encoding]).toBe("gzip");
  });

  it("refuses a gzip request that inflates past readMaxBytes the same", async () => {
    const [parley, reference] = await twins.both((s) =>
      callUnary(s, wire, `echo:${"z".repeat(2 * readMaxBytes)}`, { gzip: true }),
    );
    expect(parley).toEqual(reference);
    expect(parley.error).toMatchObject({
      code: "ResourceExhausted",
      message: "message is larger than configured readMaxBytes 8192 after decompression",
    });
  });

  it("answers a body that does not decode as its request type the same: INVALID_ARGUMENT", async () => {
    const [parley, reference] = await twins.both((s) =>
      createClient(mistypedService, s.transport(wire))
        .getTask({ id: 12 } as never)
        .then(
          () => undefined,
          (e: unknown) => errorView(e),
        ),
    );
    expect(parley).toEqual(reference);
    expect(parley?.code).toBe("InvalidArgument");
    expect(parley?.message).toMatch(wire.binary ? /lf\.a2a\.v1\.GetTaskRequest/ : /GetTaskRequest\.id/);
  });
});

describe("on the wire, where the two answer differently on purpose", () => {
  const post = async (baseUrl: string, path: string, body: Uint8Array) => {
    const session = http2.connect(baseUrl);
    try {
      return await h2Post(session, path, { "content-type": "application/grpc" }, body);
    } finally {
      session.close();
    }
  };

  it("answers an unknown path 404 naming it, where connect-node's 404 is empty (rpc-handler.ts)", async () => {
    const [parley, reference] = await twins.both((s) =>
      post(s.urls.h2, "/no.such.Service/Call", grpcEnvelope(new Uint8Array())),
    );
    expect([parley.status, reference.status]).toEqual([404, 404]);
    expect(parley.body.toString()).toBe("no such RPC: /no.such.Service/Call\n");
    expect(reference.body.length).toBe(0);
  });

  it("percent-encodes grpc-message as gRPC defines it, where connect-es encodes a URI component (grpc-status.ts)", async () => {
    const request = grpcEnvelope(toBinary(GetTaskRequestSchema, create(GetTaskRequestSchema, { id: "not-found" })));
    const path = "/lf.a2a.v1.A2AService/GetTask";
    const [parley, reference] = await twins.both((s) => post(s.urls.h2, path, request));
    // Parley's is trailers-only (grpc-route.ts): the status in the headers.
    const message = (fields: http2.IncomingHttpHeaders | undefined) => String(fields?.["grpc-message"]);
    expect(message(parley.headers)).toBe("no task here: 100%25 gone, na%C3%AFve");
    expect(message(reference.trailers)).toBe("no%20task%20here%3A%20100%25%20gone%2C%20na%C3%AFve");
    // Either decodes to the same text.
    expect(decodeURIComponent(message(parley.headers))).toBe(errorText);
    expect(decodeURIComponent(message(reference.trailers))).toBe(errorText);
  });
});
