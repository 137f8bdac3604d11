import { type FSWatcher, readFileSync, watch } from "node:fs";
import { createSecureContext, type SecureContextOptions, type TlsOptions, type Server as TlsServer } from "node:tls";

/** The `tls` settings: PEM files of the certificate chain, its key and, for mTLS, the CA client certificates need. */
export interface TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** Set: every client must present a certificate this CA signed (mTLS); others fail the handshake. */
  readonly clientCaFile?: string;
}

/** What a reload reports: where the logger is not at hand (tests), the callers pass their own. */
export interface TlsReloadLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** True when the settings turn TLS on (a certificate and its key); both or neither, the schema says. */
export function tlsEnabled(tls: { readonly certFile?: string | undefined }): tls is TlsFiles {
  return typeof tls.certFile === "string" && tls.certFile !== "";
}

/** Reads the files into secure context options; throws naming the file that cannot be read or used. */
export function readTlsFiles(files: TlsFiles): SecureContextOptions {
  const read = (path: string, what: string) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new Error(`cannot read the TLS ${what} ${path}: ${(error as Error).message}`);
    }
  };
  const options: SecureContextOptions = {
    cert: read(files.certFile, "certificate (tls.certFile)"),
    key: read(files.keyFile, "key (tls.keyFile)"),
    ...(files.clientCaFile ? { ca: read(files.clientCaFile, "client CA (tls.clientCaFile)") } : {}),
  };
  try {
    // Fails here, at start or reload, not at the first handshake: a key that does not match its certificate.
    createSecureContext(options);
  } catch (error) {
    throw new Error(
      `the TLS certificate ${files.certFile} and key ${files.keyFile} cannot be used: ${(error as Error).message}`,
    );
  }
  return options;
}

/**
 * The options of a TLS listening port: the files' context, ALPN (the protocols the port speaks, h2 first where it
 * serves HTTP/2), client certificates required when a client CA is set, and the handshake bounded like a request's
 * headers.
 */
export function tlsServerOptions(files: TlsFiles, alpn: readonly string[], handshakeTimeoutMs: number): TlsOptions {
  const mutual = files.clientCaFile !== undefined && files.clientCaFile !== "";
  return {
    ...readTlsFiles(files),
    ALPNProtocols: [...alpn],
    requestCert: mutual,
    rejectUnauthorized: mutual,
    handshakeTimeout: handshakeTimeoutMs,
  };
}

/**
 * Reloads the certificate, key and client CA of `server` on SIGHUP and when a file changes (renamed over or
 * written): new connections get the new context, open ones keep theirs. A set of files that does not load is
 * logged and the old context kept. Returns the function that stops watching.
 */
export function reloadTlsOnChange(server: TlsServer, files: TlsFiles, log: TlsReloadLog, port: string): () => void {
  let timer: NodeJS.Timeout | undefined;
  const reload = (why: string) => {
    try {
      server.setSecureContext(readTlsFiles(files));
      log.info({ port, why, certFile: files.certFile }, "TLS certificate reloaded");
    } catch (error) {
      log.error({ port, why, err: error }, "TLS certificate not reloaded; the previous one stays in use");
    }
  };
  // A certificate replaced in place arrives as several events (truncate, write, rename): one reload after them.
  const soon = (why: string) => {
    clearTimeout(timer);
    timer = setTimeout(() => reload(why), 100);
    timer.unref();
  };
  const onSighup = () => reload("SIGHUP");
  process.on("SIGHUP", onSighup);
  const watchers: FSWatcher[] = [];
  for (const path of [files.certFile, files.keyFile, files.clientCaFile]) {
    if (!path) continue;
    const directory = path.slice(0, Math.max(path.lastIndexOf("/"), 0)) || ".";
    const name = path.slice(path.lastIndexOf("/") + 1);
    // The directory, not the file: a file renamed over (how certificates are usually rotated) ends a file watch.
    const watcher = watch(directory, { persistent: false }, (_event, changed) => {
      if (changed === null || changed === name) soon(`${path} changed`);
    });
    watcher.on("error", (error) => log.error({ port, err: error, path }, "cannot watch the TLS file"));
    watchers.push(watcher);
  }
  return () => {
    clearTimeout(timer);
    process.off("SIGHUP", onSighup);
    for (const watcher of watchers) watcher.close();
  };
}
