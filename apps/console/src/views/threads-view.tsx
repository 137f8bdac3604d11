import { Code, ConnectError } from "@connectrpc/connect";
import { HistoryOrder, type Thread, type ThreadMessage } from "@parley/proto";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { Connection } from "../connection.js";
import type { LiveReply } from "../follow-task.js";
import { describeError, type ShownError } from "../logic/errors.js";
import { partsText, provenanceLabel, roleLabel } from "../logic/format.js";
import { currentToken, firstPage, type Pager as PagerState, withNextToken } from "../logic/paging.js";
import { matchThreads } from "../logic/threads.js";
import { ErrorBox, Id, Time } from "./bits.js";
import { Composer } from "./composer.js";
import { PickList } from "./pick-list.js";

const threadPageSize = 20;
const historyPageSize = 50;

/** The tenant's threads, newest first, with one thread's history and a composer beside them. */
/** `active`: the view is shown; each time it is, the list is read again. */
export function ThreadsView(props: { conn: Connection; agents: readonly string[]; active: boolean }) {
  const { conn } = props;
  const [pager, setPager] = useState<PagerState>(firstPage);
  const [threads, setThreads] = useState<Thread[]>([]);
  const [query, setQuery] = useState("");
  const [selected, setSelected] = useState<string | undefined>();
  // The reply a new thread's composer followed, shown on in that thread once it opens.
  const [handedOver, setHandedOver] = useState<LiveReply | undefined>();
  const [error, setError] = useState<ShownError | undefined>();
  const [reload, setReload] = useState(0);
  const search = useRef<HTMLInputElement>(null);

  useEffect(() => {
    let live = true;
    conn.threads.listThreads({ pageSize: threadPageSize, pageToken: currentToken(pager) }).then(
      (res) => {
        if (!live) return;
        setThreads(res.threads);
        setPager((p) => withNextToken(p, res.nextPageToken));
        setError(undefined);
      },
      (e: unknown) => live && setError(describeError(e)),
    );
    return () => {
      live = false;
    };
    // pager.index and reload decide the page; nextToken is what this effect writes.
  }, [conn, pager.index, reload, props.active]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "/" && !(e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement)) {
        e.preventDefault();
        search.current?.focus();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const refresh = useCallback(() => setReload((n) => n + 1), []);
  const shown = matchThreads(threads, query);

  return (
    <div class="split">
      <aside class="list-pane" aria-label="threads">
        <form
          class="search"
          onSubmit={(e) => {
            e.preventDefault();
            // An exact contextId opens that thread even when it is not on this page.
            if (query.trim() !== "") setSelected(query.trim());
          }}
        >
          <input
            ref={search}
            type="search"
            value={query}
            onInput={(e) => setQuery(e.currentTarget.value)}
            placeholder="Search by context id ( / )"
            aria-label="search by context id"
            spellcheck={false}
          />
        </form>
        <div class="row">
          <button type="button" class="primary" onClick={() => setSelected(undefined)}>
            New thread
          </button>
          <button type="button" onClick={refresh}>
            Refresh
          </button>
        </div>
        <ErrorBox error={error} />
        <PickList
          items={shown}
          idOf={(t) => t.contextId}
          selected={selected}
          onSelect={setSelected}
          title={(t) => t.contextId}
          meta={(t) => (
            <>
              <Time ts={t.updateTime} /> · {String(t.messageCount)} msgs
            </>
          )}
          empty={query ? "no thread on this page matches" : "no threads"}
          pager={pager}
          onPage={setPager}
        />
      </aside>
      <section class="detail-pane">
        {selected === undefined ? (
          <div class="detail">
            <h2>New thread</h2>
            <Composer
              conn={conn}
              agents={props.agents}
              onReplyEnded={(contextId, reply) => {
                // The thread it just wrote to opens, its reply still shown under the history that now holds it.
                setHandedOver(reply);
                setSelected(contextId);
                refresh();
              }}
            />
          </div>
        ) : (
          <ThreadDetail
            key={selected}
            conn={conn}
            contextId={selected}
            agents={props.agents}
            {...(handedOver?.reply.contextId === selected ? { lastReply: handedOver } : {})}
            onChanged={refresh}
            onDeleted={() => {
              setSelected(undefined);
              refresh();
            }}
          />
        )}
      </section>
    </div>
  );
}

function ThreadDetail(props: {
  conn: Connection;
  contextId: string;
  agents: readonly string[];
  onChanged: () => void;
  onDeleted: () => void;
  lastReply?: LiveReply;
}) {
  const { conn, contextId } = props;
  const [thread, setThread] = useState<Thread | undefined>();
  const [messages, setMessages] = useState<ThreadMessage[]>([]);
  const [nextToken, setNextToken] = useState("");
  const [error, setError] = useState<ShownError | undefined>();
  const [missing, setMissing] = useState(false);
  const [reload, setReload] = useState(0);
  const confirm = useRef<HTMLDialogElement>(null);

  const load = useCallback(
    async (pageToken: string) => {
      try {
        const res = await conn.threads.getThreadHistory({
          contextId,
          order: HistoryOrder.OLDEST_FIRST,
          pageSize: historyPageSize,
          pageToken,
        });
        setThread(res.thread);
        setMessages((m) => (pageToken === "" ? res.messages : [...m, ...res.messages]));
        setNextToken(res.nextPageToken);
        setError(undefined);
        setMissing(false);
      } catch (e) {
        if (ConnectError.from(e).code === Code.NotFound) setMissing(true);
        else setError(describeError(e));
      }
    },
    [conn, contextId],
  );
  useEffect(() => {
    void load("");
  }, [load, reload]);

  const remove = async () => {
    try {
      await conn.threads.deleteThread({ contextId });
      props.onDeleted();
    } catch (e) {
      setError(describeError(e));
    }
  };

  return (
    <div class="detail">
      <header class="detail-head">
        <h2 title={contextId}>{contextId}</h2>
        {thread && (
          <span class="muted">
            {String(thread.messageCount)} messages · started <Time ts={thread.createTime} />
          </span>
        )}
        <button type="button" class="danger" disabled={!thread} onClick={() => confirm.current?.showModal()}>
          Delete thread
        </button>
      </header>
      <ErrorBox error={error} />
      {missing && <p class="muted">No thread with this context id in this tenant (yet). Send to start it.</p>}
      <ol class="history" aria-label="history">
        {messages.map((m) => {
          const provenance = provenanceLabel(m);
          const role = roleLabel(m.message?.role ?? 0);
          return (
            <li key={String(m.sequence)} class={`msg prov-${provenance}`}>
              <div class="msg-head">
                <span class="seq">#{String(m.sequence)}</span>
                <span class="role">{role}</span>
                {/* The provenance only where it says more than the role (inter-session, announce, imported). */}
                {provenance !== role && <span class={`prov prov-${provenance}`}>{provenance}</span>}
                <Time ts={m.createTime} />
                {m.message?.taskId && (
                  <span class="muted">
                    task <Id id={m.message.taskId} />
                  </span>
                )}
              </div>
              <pre class="msg-text">{partsText(m.message?.parts ?? [])}</pre>
            </li>
          );
        })}
      </ol>
      {nextToken !== "" && (
        <button type="button" onClick={() => void load(nextToken)}>
          Load later messages
        </button>
      )}
      <Composer
        conn={conn}
        agents={props.agents}
        contextId={contextId}
        {...(props.lastReply ? { initialReply: props.lastReply } : {})}
        onReplyEnded={() => {
          setReload((n) => n + 1);
          props.onChanged();
        }}
      />
      <dialog ref={confirm} aria-label="confirm delete">
        <form method="dialog">
          <p>
            Delete the thread <code>{contextId}</code> with all its {thread ? String(thread.messageCount) : ""}{" "}
            messages? This cannot be undone.
          </p>
          <div class="row">
            <button type="submit" value="cancel" autofocus>
              Keep it
            </button>
            <button
              type="button"
              class="danger"
              onClick={() => {
                confirm.current?.close();
                void remove();
              }}
            >
              Delete
            </button>
          </div>
        </form>
      </dialog>
    </div>
  );
}
