import { useEffect, useState } from "preact/hooks";
import type { Connection } from "../connection.js";
import { type LiveReply, sendAndFollow } from "../follow-task.js";
import { describeError, type ShownError } from "../logic/errors.js";
import { cancelable } from "../logic/reply-stream.js";
import { AgentSelect, ErrorBox } from "./bits.js";
import { useLatestRun } from "./latest-run.js";
import { ReplyPanel } from "./reply-panel.js";

/**
 * Sends a message to a chosen agent, into the given thread or a new one, and
 * shows the reply as it streams. Ctrl+Enter sends, Escape cancels the running
 * task.
 */
export function Composer(props: {
  conn: Connection;
  agents: readonly string[];
  /** The thread to send into; undefined: the user names one, or leaves it empty for a new thread. */
  contextId?: string;
  onReplyEnded: (contextId: string, reply: LiveReply) => void;
  /** A reply to show from the start: the one a new thread's composer followed before this thread opened. */
  initialReply?: LiveReply;
}) {
  const [agent, setAgent] = useState(props.agents[0] ?? "");
  const [contextId, setContextId] = useState("");
  const [text, setText] = useState("");
  const [live, setLive] = useState<LiveReply | undefined>(props.initialReply);
  const [error, setError] = useState<ShownError | undefined>();
  const [sending, setSending] = useState(false);
  const newRun = useLatestRun();

  useEffect(() => {
    if (agent === "" && props.agents[0]) setAgent(props.agents[0]);
  }, [props.agents, agent]);

  const send = async () => {
    if (text.trim() === "" || sending) return;
    const controller = newRun();
    setSending(true);
    setError(undefined);
    setLive(undefined);
    try {
      const target = props.contextId ?? contextId.trim();
      const final = await sendAndFollow(props.conn, { agent, contextId: target, text }, setLive, controller.signal);
      setLive(final);
      setText("");
      if (final.reply.contextId) props.onReplyEnded(final.reply.contextId, final);
    } catch (e) {
      if (!controller.signal.aborted) setError(describeError(e));
    } finally {
      setSending(false);
    }
  };
  const cancelBusy = async (taskId: string) => {
    try {
      await props.conn.a2a.cancelTask({ id: taskId });
      setError(undefined);
    } catch (e) {
      setError(describeError(e));
    }
  };
  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      void send();
    }
    if (e.key === "Escape" && live && cancelable(live.reply)) {
      e.preventDefault();
      void props.conn.a2a.cancelTask({ id: live.reply.taskId }).catch((err: unknown) => setError(describeError(err)));
    }
  };

  return (
    <div class="composer">
      <form
        class="composer-form"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <div class="row">
          <AgentSelect agents={props.agents} value={agent} onChange={setAgent} />
          {props.contextId === undefined && (
            <label class="grow">
              Context id
              <input
                value={contextId}
                onInput={(e) => setContextId(e.currentTarget.value)}
                placeholder="empty: Parley starts a new thread"
                spellcheck={false}
              />
            </label>
          )}
        </div>
        <label>
          Message
          <textarea
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
            onKeyDown={onKeyDown}
            rows={3}
            placeholder="Ctrl+Enter sends"
          />
        </label>
        <div class="row">
          <button type="submit" class="primary" disabled={sending || text.trim() === ""}>
            {sending ? "Sending…" : "Send"}
          </button>
          <span class="muted">Ctrl+Enter sends · Escape cancels the running task</span>
        </div>
      </form>
      <ErrorBox error={error} />
      {error?.reason === "CONTEXT_BUSY" && error.taskId && (
        <div class="row">
          <button type="button" class="danger" onClick={() => void cancelBusy(error.taskId!)}>
            Cancel the running task
          </button>
          <span class="muted">then send again</span>
        </div>
      )}
      {live && <ReplyPanel conn={props.conn} live={live} />}
    </div>
  );
}
