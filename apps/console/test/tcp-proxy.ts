import { connect, createServer, type Socket } from "node:net";

export interface TcpProxy {
  /** http://127.0.0.1:<port>/ */
  readonly url: string;
  /**
   * A network blip: every open connection is cut at once, and connections
   * made in the next `downMs` are cut as soon as they open.
   */
  blip(downMs: number): void;
  close(): Promise<void>;
}

/** A loopback TCP relay in front of a server, so a test can cut the browser's connections like a real network fault. */
export async function startTcpProxy(target: URL): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let downUntil = 0;
  const server = createServer((client) => {
    if (Date.now() < downUntil) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on("close", () => open.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/`,
    blip(downMs) {
      downUntil = Date.now() + downMs;
      for (const s of open) s.destroy();
    },
    close() {
      for (const s of open) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
