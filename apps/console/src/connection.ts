import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { A2AService, AccessService, headers, SessionService, TargetService, ThreadService } from "@parley/proto";

/** The generated clients of every service the console uses, bound to one base URL and key. */
export interface Connection {
  /** "" means the page's own origin (the bridge that served it). */
  readonly baseUrl: string;
  readonly a2a: Client<typeof A2AService>;
  readonly threads: Client<typeof ThreadService>;
  readonly sessions: Client<typeof SessionService>;
  readonly targets: Client<typeof TargetService>;
  readonly access: Client<typeof AccessService>;
}

/** The A2A protocol version the console speaks. */
export const a2aVersion = "1.0";

export function createConnection(settings: { readonly baseUrl: string; readonly apiKey: string }): Connection {
  const credentials: Interceptor = (next) => (req) => {
    if (settings.apiKey !== "") req.header.set("authorization", `Bearer ${settings.apiKey}`);
    req.header.set(headers.a2aVersion, a2aVersion);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: settings.baseUrl === "" ? window.location.origin : settings.baseUrl.replace(/\/+$/, ""),
    interceptors: [credentials],
  });
  return {
    baseUrl: settings.baseUrl,
    a2a: createClient(A2AService, transport),
    threads: createClient(ThreadService, transport),
    sessions: createClient(SessionService, transport),
    targets: createClient(TargetService, transport),
    access: createClient(AccessService, transport),
  };
}

const keyStorage = "parley.console.apiKey";
const baseUrlStorage = "parley.console.baseUrl";

/**
 * The API key lives in sessionStorage only: it is gone when the tab closes and
 * never written to disk by the page. The base URL is no secret and is kept.
 */
export function loadSettings(): { baseUrl: string; apiKey: string } {
  return {
    baseUrl: localStorage.getItem(baseUrlStorage) ?? "",
    apiKey: sessionStorage.getItem(keyStorage) ?? "",
  };
}

export function saveSettings(settings: { readonly baseUrl: string; readonly apiKey: string }): void {
  if (settings.baseUrl === "") localStorage.removeItem(baseUrlStorage);
  else localStorage.setItem(baseUrlStorage, settings.baseUrl);
  if (settings.apiKey === "") sessionStorage.removeItem(keyStorage);
  else sessionStorage.setItem(keyStorage, settings.apiKey);
}
