import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import {
  type ConnectRouter,
  type ConnectRouterOptions,
  createConnectRouter,
  createContextValues,
} from "@connectrpc/connect";
import { validateUniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { clientAddressKey } from "../call-context.js";
import { type CallableServices, createServiceCalls } from "../service-calls.js";
import { createConnectRoute } from "./connect-route.js";
import { createGrpcRoute } from "./grpc-route.js";

export interface RpcHandlerOptions {
  /** Every service the port serves, as connect-node registers them. */
  readonly routes: (router: ConnectRouter) => void;
  readonly routerOptions: ConnectRouterOptions;
  /** The services served on Parley's own gRPC and Connect routes; the rest, and other protocols, go to connect-node. */
  readonly services: CallableServices;
  readonly shutdownSignal: AbortSignal;
  /** Whether Parley's own routes take their calls (the default); false leaves every call to connect-node. */
  readonly ownRoutes?: boolean;
}

type Handler = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => void;

/**
 * The RPC handler of a port: Parley's own gRPC and Connect routes for the unary and server-streaming methods of
 * `services`, connect-node for everything else; an unknown path is answered 404 naming it.
 */
export function createRpcHandler(options: RpcHandlerOptions): Handler {
  const { routes, routerOptions, services, shutdownSignal } = options;
  const fallback = connectNodeAdapter({
    routes,
    ...routerOptions,
    contextValues: (req) => createContextValues().set(clientAddressKey, req.socket?.remoteAddress),
    fallback(req, res) {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end(`no such RPC: ${req.url}\n`);
    },
  });
  const own = {
    calls: createServiceCalls(services, routerOptions.interceptors ?? [], shutdownSignal),
    methods: [...services.values()].flatMap((s) => s.service.methods),
    handlerOptions: validateUniversalHandlerOptions(routerOptions),
  };
  return options.ownRoutes === false ? fallback : createGrpcRoute(own, createConnectRoute(own, fallback));
}

/** The request paths of the client- and bidi-streaming RPCs `routes` serves: their bodies stream. */
export function streamingRequestPaths(routes: (router: ConnectRouter) => void): Set<string> {
  const router = createConnectRouter();
  routes(router);
  return new Set(
    router.handlers
      .filter((h) => h.method.methodKind === "client_streaming" || h.method.methodKind === "bidi_streaming")
      .map((h) => h.requestPath),
  );
}
