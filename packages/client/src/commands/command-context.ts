import { createParleyClient, type HttpVersion, type ParleyClient, type ParleyProtocol } from "../client.js";
import { type ClientConfig, type CliProtocol, loadClientConfig } from "../config.js";
import { createConnectionErrorInterceptor } from "./connection-errors.js";

/** The CLI's global options, as commander parsed them. */
export interface GlobalOptions {
  server?: string;
  protocol?: CliProtocol;
  httpVersion?: HttpVersion;
  token?: string;
  config?: string;
}

/**
 * What one run of a command needs: the client config and the clients it
 * opened, closed once the command is done so no HTTP/2 session keeps the
 * process alive.
 */
export class CommandContext {
  private readonly clients: ParleyClient[] = [];
  readonly config: ClientConfig;
  /** --protocol as given; "rest" leaves the server's own protocol (for thread commands) to the config. */
  readonly explicitProtocol: CliProtocol | undefined;

  constructor(options: GlobalOptions) {
    this.config = loadClientConfig({
      path: options.config,
      overrides: {
        server: options.server,
        protocol: options.protocol === "rest" ? undefined : options.protocol,
        httpVersion: options.httpVersion,
        token: options.token,
      },
    });
    this.explicitProtocol = options.protocol;
  }

  /** A client for the configured server, or for another URL (whose token is then only the one given). */
  client(options: { baseUrl?: string; protocol?: ParleyProtocol; token?: string; agent?: string } = {}): ParleyClient {
    const baseUrl = options.baseUrl ?? this.config.server;
    const protocol = options.protocol ?? this.config.protocol;
    const client = createParleyClient({
      baseUrl,
      protocol,
      // Of Connect and gRPC-Web; createParleyClient runs gRPC over HTTP/2 whatever this says.
      httpVersion: this.config.httpVersion,
      token: options.baseUrl ? options.token : (options.token ?? this.config.token),
      agent: options.agent,
      interceptors: [createConnectionErrorInterceptor({ baseUrl, protocol })],
    });
    this.clients.push(client);
    return client;
  }

  close() {
    for (const client of this.clients) client.close();
  }
}

/** Runs a command's action with a fresh context, prints its failure and records its exit code. */
export type RunCommand = (action: (context: CommandContext) => Promise<number>) => Promise<void>;
