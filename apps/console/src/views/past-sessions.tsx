import { ConversationState, type ConversationSummary } from "@parley/proto";
import { useEffect, useState } from "preact/hooks";
import type { Connection } from "../connection.js";
import { describeError, type ShownError } from "../logic/errors.js";
import { stopReasonLabel } from "../logic/format.js";
import { currentToken, firstPage, type Pager as PagerState, withNextToken } from "../logic/paging.js";
import { Badge, ErrorBox, Id, Time } from "./bits.js";
import { PickList } from "./pick-list.js";

const stateLabels: Readonly<Record<number, string>> = {
  [ConversationState.RUNNING]: "running",
  [ConversationState.DONE]: "done",
};

/**
 * The tenant's stored sessions (ListConversations), newest first, paged and filtered by state and agent; picking
 * one calls `onOpen` with its id. `reload` changes when the list should be read again (a session just ended).
 */
export function PastSessions(props: {
  conn: Connection;
  selected: string | undefined;
  onOpen: (conversationId: string) => void;
  reload: number;
}) {
  const { conn } = props;
  const [state, setState] = useState<ConversationState>(ConversationState.UNSPECIFIED);
  const [agent, setAgent] = useState("");
  const [filter, setFilter] = useState({ state: ConversationState.UNSPECIFIED, agent: "" });
  const [pager, setPager] = useState<PagerState>(firstPage);
  const [items, setItems] = useState<ConversationSummary[]>([]);
  const [error, setError] = useState<ShownError | undefined>();
  const [refresh, setRefresh] = useState(0);

  useEffect(() => {
    let live = true;
    conn.sessions
      .listConversations({ state: filter.state, agent: filter.agent, pageSize: 20, pageToken: currentToken(pager) })
      .then(
        (res) => {
          if (!live) return;
          setItems(res.conversations);
          setPager((p) => withNextToken(p, res.nextPageToken));
          setError(undefined);
        },
        (e: unknown) => live && setError(describeError(e)),
      );
    return () => {
      live = false;
    };
  }, [conn, filter, pager.index, refresh, props.reload]);

  return (
    <aside class="list-pane" aria-label="past sessions">
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setPager(firstPage);
          setFilter({ state, agent: agent.trim() });
        }}
      >
        <label>
          Session state
          <select value={state} onChange={(e) => setState(Number(e.currentTarget.value) as ConversationState)}>
            <option value={ConversationState.UNSPECIFIED}>any</option>
            <option value={ConversationState.RUNNING}>running</option>
            <option value={ConversationState.DONE}>done</option>
          </select>
        </label>
        <label>
          With agent
          <input value={agent} onInput={(e) => setAgent(e.currentTarget.value)} spellcheck={false} />
        </label>
        <div class="row">
          <button type="submit" class="primary">
            Filter
          </button>
          <button type="button" onClick={() => setRefresh((n) => n + 1)}>
            Refresh
          </button>
        </div>
      </form>
      <ErrorBox error={error} />
      <PickList
        items={items}
        idOf={(s) => s.conversationId}
        selected={props.selected}
        onSelect={props.onOpen}
        title={(s) => (
          <>
            <Badge tone={s.state === ConversationState.RUNNING ? "running" : "idle"}>
              {stateLabels[s.state] ?? "unknown"}
            </Badge>{" "}
            {s.requesterAgent} → {s.targetAgent}
          </>
        )}
        meta={(s) => (
          <>
            <Time ts={s.updateTime} /> · <Id id={s.conversationId} keep={12} /> · {Number(s.eventCount)} steps
            {s.stopReason ? ` · ${stopReasonLabel(s.stopReason)}` : ""}
          </>
        )}
        empty="no sessions"
        pager={pager}
        onPage={setPager}
      />
    </aside>
  );
}
