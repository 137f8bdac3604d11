import { createReadStream, type Stats } from "node:fs";
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { dirname, extname, join, resolve, sep } from "node:path";
import type { HttpRoute } from "./http-route.js";

/** Where the console is served. */
export const consolePath = "/console";

const contentTypes: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * The console's page talks only to its own origin by default, but its base URL
 * field may point at another Parley, so connect-src allows any http(s) origin.
 */
const securityHeaders = {
  "Content-Security-Policy":
    "default-src 'self'; connect-src 'self' http: https:; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};

/** The console's build output, found through the @parley/console package the bridge depends on. */
export function defaultConsoleDir(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve("@parley/console/package.json")), "dist");
}

function sendText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", ...securityHeaders, ...headers });
  res.end(`${text}\n`);
}

/**
 * The file a request path names inside the console's directory, or undefined
 * when the path is not one (an encoded slash, a dot segment, a hidden file):
 * such paths are refused, never resolved, so nothing outside the directory is
 * ever read.
 */
export function consoleFileOf(root: string, pathname: string): string | undefined {
  const rest = pathname.slice(consolePath.length + 1);
  const segments: string[] = [];
  for (const raw of rest.split("/")) {
    if (raw === "") continue;
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (segment.startsWith(".") || /[\\/\0]/.test(segment)) return undefined;
    segments.push(segment);
  }
  const base = resolve(root);
  const file = resolve(base, ...segments);
  return file === base || file.startsWith(base + sep) ? file : undefined;
}

async function fileStats(path: string): Promise<Stats | undefined> {
  try {
    const s = await stat(path);
    return s.isFile() ? s : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Serves the console's static build at /console/: content types by
 * extension, hashed assets cached for a year, index.html revalidated every
 * time, and every path without a file extension answered with index.html so
 * a reload of any view works (SPA fallback).
 */
export function createConsoleRoute(options: { readonly dir?: string } = {}): HttpRoute {
  const root = resolve(options.dir ?? defaultConsoleDir());

  async function serve(req: IncomingMessage, res: ServerResponse, pathname: string): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendText(res, 405, `method ${req.method} is not allowed on ${consolePath}; use GET`, { Allow: "GET, HEAD" });
      return;
    }
    if (pathname === consolePath) {
      res.writeHead(308, { Location: `${consolePath}/`, ...securityHeaders });
      res.end();
      return;
    }
    let file = consoleFileOf(root, pathname);
    if (file === undefined) {
      sendText(res, 400, `${consolePath}: the path ${JSON.stringify(pathname)} does not name a console file`);
      return;
    }
    let stats = file === root ? undefined : await fileStats(file);
    if (!stats) {
      // A missing asset is a 404; any other path is a view of the app.
      if (extname(file) !== "") {
        sendText(res, 404, `${consolePath}: no file ${JSON.stringify(pathname)}`);
        return;
      }
      file = join(root, "index.html");
      stats = await fileStats(file);
      if (!stats) {
        sendText(res, 404, `the console is not built in ${root}; run npm run build`);
        return;
      }
    }
    const hashed = file.startsWith(join(root, "assets") + sep);
    const etag = `"${stats.size.toString(36)}-${Math.floor(stats.mtimeMs).toString(36)}"`;
    const headers = {
      ...securityHeaders,
      "Content-Type": contentTypes[extname(file)] ?? "application/octet-stream",
      "Cache-Control": hashed ? "public, max-age=31536000, immutable" : "no-cache",
      ETag: etag,
    };
    if (req.headers["if-none-match"] === etag) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, "Content-Length": stats.size });
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    const stream = createReadStream(file);
    stream.on("error", () => res.destroy());
    stream.pipe(res);
  }

  return {
    matches: (pathname) => pathname === consolePath || pathname.startsWith(`${consolePath}/`),
    handle(req, res) {
      const pathname = new URL(req.url ?? "/", "http://bridge.invalid").pathname;
      serve(req, res, pathname).catch((error: unknown) => {
        if (!res.headersSent) sendText(res, 500, `console: ${(error as Error).message}`);
        else res.destroy();
      });
    },
  };
}
