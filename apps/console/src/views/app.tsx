import type { GetCallerResponse } from "@parley/proto";
import { useEffect, useMemo, useState } from "preact/hooks";
import { createConnection, loadSettings, saveSettings } from "../connection.js";
import { describeError, type ShownError } from "../logic/errors.js";
import { ErrorBox } from "./bits.js";
import { SessionsView } from "./sessions-view.js";
import { TasksView } from "./tasks-view.js";
import { ThreadsView } from "./threads-view.js";

const views = [
  { id: "threads", label: "Threads", key: "1" },
  { id: "sessions", label: "Sessions", key: "2" },
  { id: "tasks", label: "Tasks", key: "3" },
] as const;
type ViewId = (typeof views)[number]["id"];

function typing(target: EventTarget | null): boolean {
  return (
    target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement
  );
}

export function App() {
  const [settings, setSettings] = useState(loadSettings);
  const [draft, setDraft] = useState(settings);
  const [view, setView] = useState<ViewId>("threads");
  const [caller, setCaller] = useState<GetCallerResponse | undefined>();
  const [accessError, setAccessError] = useState<ShownError | undefined>();
  const conn = useMemo(() => createConnection(settings), [settings]);

  useEffect(() => {
    let live = true;
    setCaller(undefined);
    setAccessError(undefined);
    conn.access.getCaller({}).then(
      (res) => live && setCaller(res),
      (e: unknown) => live && setAccessError(describeError(e)),
    );
    return () => {
      live = false;
    };
  }, [conn]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (typing(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
      const picked = views.find((v) => v.key === e.key);
      if (picked) setView(picked.id);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const apply = (e: Event) => {
    e.preventDefault();
    const next = { baseUrl: draft.baseUrl.trim(), apiKey: draft.apiKey.trim() };
    saveSettings(next);
    setSettings(next);
  };

  // Every view is keyed by the connection: a new key or URL drops all state of the previous tenant.
  const connectionKey = `${settings.baseUrl}\n${settings.apiKey}`;
  const agents = caller?.agents ?? [];
  return (
    <div class="app">
      <header class="topbar">
        <span class="brand">Parley console</span>
        <nav aria-label="views">
          {views.map((v) => (
            <button
              key={v.id}
              type="button"
              class={view === v.id ? "tab active" : "tab"}
              aria-current={view === v.id ? "page" : undefined}
              aria-keyshortcuts={v.key}
              onClick={() => setView(v.id)}
            >
              {v.label} <kbd>{v.key}</kbd>
            </button>
          ))}
        </nav>
        <form class="access" onSubmit={apply} aria-label="access">
          <label>
            Parley URL
            <input
              value={draft.baseUrl}
              onInput={(e) => setDraft({ ...draft, baseUrl: e.currentTarget.value })}
              placeholder="this origin"
              spellcheck={false}
              size={22}
            />
          </label>
          <label>
            API key
            <input
              type="password"
              value={draft.apiKey}
              onInput={(e) => setDraft({ ...draft, apiKey: e.currentTarget.value })}
              placeholder="none (open mode)"
              autocomplete="off"
              size={14}
            />
          </label>
          <button type="submit">Connect</button>
          <span class="tenant" role="status" aria-label="tenant" data-tenant={caller?.tenant ?? ""}>
            {caller
              ? `tenant ${caller.tenant}${caller.openMode ? " (open mode)" : ""}`
              : accessError
                ? "not connected"
                : "connecting…"}
          </span>
        </form>
      </header>
      <main class="main">
        <ErrorBox error={accessError} />
        {caller && (
          // Views stay mounted while hidden, so a reply keeps streaming while another view is open.
          <div key={connectionKey} class="view">
            <div hidden={view !== "threads"} data-view="threads">
              <ThreadsView conn={conn} agents={agents} active={view === "threads"} />
            </div>
            <div hidden={view !== "sessions"} data-view="sessions">
              <SessionsView conn={conn} agents={agents} active={view === "sessions"} />
            </div>
            <div hidden={view !== "tasks"} data-view="tasks">
              <TasksView conn={conn} active={view === "tasks"} />
            </div>
          </div>
        )}
      </main>
    </div>
  );
}
