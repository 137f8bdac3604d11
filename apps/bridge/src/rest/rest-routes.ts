/**
 * The paths of the HTTP+JSON binding (A2A 1.0 section 11, the google.api.http rules of a2a.proto): each one names
 * an A2AService method, the ids it carries and the HTTP methods it takes. Every path has a `/{tenant}/...` form,
 * and a named agent's paths sit below its base URL `/agents/<name>` (the JSON-RPC URL of the agent, without "/").
 */

/** One HTTP+JSON operation, found from a request path. */
export interface RestRoute {
  /** The A2AService method (as methods.ts names it). */
  readonly method: string;
  /** The HTTP methods this path takes; the first is the one the 405 names. */
  readonly httpMethods: readonly string[];
  /** The named agent of /agents/<name>/...; absent for the default agent. */
  readonly agent?: string;
  /** The tenant of the `/{tenant}/...` form; absent otherwise. */
  readonly tenant?: string;
  /** Request fields bound by the path, under their JSON names (`id`, `taskId`). */
  readonly pathFields: Readonly<Record<string, string>>;
  /** Whether the request's fields come from the body (POST) rather than the query (GET, DELETE). */
  readonly body: boolean;
}

type Operation = Omit<RestRoute, "agent" | "tenant">;

/** The path below the base URL (and the tenant), split into segments, as one operation or undefined. */
function operationOf(segments: readonly string[]): Operation | undefined {
  const [first, second, third, fourth] = segments;
  switch (segments.length) {
    case 1:
      if (first === "message:send") return op("SendMessage", ["POST"], {}, true);
      if (first === "message:stream") return op("SendStreamingMessage", ["POST"], {}, true);
      if (first === "tasks") return op("ListTasks", ["GET"], {}, false);
      if (first === "extendedAgentCard") return op("GetExtendedAgentCard", ["GET"], {}, false);
      return undefined;
    case 2: {
      if (first !== "tasks" || second === undefined || second === "") return undefined;
      // A task id may hold a colon itself: the verb is what follows the last one.
      const colon = second.lastIndexOf(":");
      const verb = colon >= 0 ? second.slice(colon + 1) : "";
      const id = colon >= 0 ? second.slice(0, colon) : second;
      if (verb === "cancel" && id !== "") return op("CancelTask", ["POST"], { id }, true);
      // The proto's rule says GET, section 11.3 says POST; SDKs send either.
      if (verb === "subscribe" && id !== "") return op("SubscribeToTask", ["POST", "GET"], { id }, false);
      return op("GetTask", ["GET"], { id: second }, false);
    }
    case 3:
      if (first !== "tasks" || !second || third !== "pushNotificationConfigs") return undefined;
      return {
        method: "",
        httpMethods: ["POST", "GET"],
        pathFields: { taskId: second },
        body: true,
      };
    case 4:
      if (first !== "tasks" || !second || third !== "pushNotificationConfigs" || !fourth) return undefined;
      return { method: "", httpMethods: ["GET", "DELETE"], pathFields: { taskId: second, id: fourth }, body: false };
    default:
      return undefined;
  }
}

function op(method: string, httpMethods: readonly string[], pathFields: Record<string, string>, body: boolean) {
  return { method, httpMethods, pathFields, body };
}

/** The push notification config paths take two HTTP methods each, for two operations. */
function withHttpMethod(operation: Operation, httpMethod: string): Operation {
  if (operation.method !== "") return operation;
  const item = "id" in operation.pathFields;
  const method = item
    ? httpMethod === "DELETE"
      ? "DeleteTaskPushNotificationConfig"
      : "GetTaskPushNotificationConfig"
    : httpMethod === "POST"
      ? "CreateTaskPushNotificationConfig"
      : "ListTaskPushNotificationConfigs";
  return { ...operation, method, body: httpMethod === "POST" };
}

/**
 * The path's segments, decoded. Empty ones are dropped: `//message:send` is what a client makes of a base URL
 * ending in "/" and a path starting with one, or of an empty tenant, and it means `/message:send`.
 */
function decodedSegments(pathname: string): string[] | undefined {
  try {
    return pathname
      .split("/")
      .filter((s) => s !== "")
      .map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

function withTenant(segments: readonly string[]): { operation: Operation; tenant?: string } | undefined {
  const plain = operationOf(segments);
  if (plain) return { operation: plain };
  const [tenant, ...rest] = segments;
  const tenanted = tenant ? operationOf(rest) : undefined;
  return tenanted && tenant ? { operation: tenanted, tenant } : undefined;
}

/**
 * The HTTP+JSON operation of a path, or undefined when the path is none. A named agent's form is tried before the
 * tenant form, so `/agents/x/tasks` is agent x's ListTasks, not tenant "agents" asking for task "x".
 */
export function matchRestRoute(pathname: string, httpMethod: string): RestRoute | undefined {
  const segments = decodedSegments(pathname);
  if (!segments || segments.length === 0) return undefined;
  let found: { operation: Operation; tenant?: string; agent?: string } | undefined;
  if (segments[0] === "agents" && segments.length > 2) {
    const inAgent = withTenant(segments.slice(2));
    if (inAgent) found = { ...inAgent, agent: segments[1] };
  }
  found ??= withTenant(segments);
  if (!found) return undefined;
  const operation = withHttpMethod(found.operation, httpMethod);
  return {
    ...operation,
    ...(found.agent !== undefined ? { agent: found.agent } : {}),
    ...(found.tenant !== undefined ? { tenant: found.tenant } : {}),
  };
}

/** The paths a 404 of the binding lists. */
export const restPaths =
  "HTTP+JSON is served at POST /message:send, POST /message:stream, GET /tasks, GET /tasks/{id}, POST /tasks/{id}:cancel, " +
  "POST|GET /tasks/{id}:subscribe, POST|GET /tasks/{id}/pushNotificationConfigs, GET|DELETE /tasks/{id}/pushNotificationConfigs/{configId} " +
  "and GET /extendedAgentCard, each also below /{tenant} and /agents/<name>";
