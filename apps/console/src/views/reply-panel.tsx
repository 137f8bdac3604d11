import { useState } from "preact/hooks";
import type { Connection } from "../connection.js";
import type { LiveReply } from "../follow-task.js";
import { describeError, type ShownError } from "../logic/errors.js";
import { taskStateLabel } from "../logic/format.js";
import { cancelable, replyText } from "../logic/reply-stream.js";
import { ErrorBox, Id, StateBadge, Time } from "./bits.js";

const linkText: Record<LiveReply["link"], string> = {
  streaming: "streaming",
  reconnecting: "connection lost, reconnecting…",
  ended: "done",
};

/**
 * A reply as it streams in. The text box keeps a minimum height and the status
 * line a fixed one, so the page does not jump while chunks arrive.
 */
export function ReplyPanel(props: { conn: Connection; live: LiveReply }) {
  const { reply, link, resumes } = props.live;
  const [cancelError, setCancelError] = useState<ShownError | undefined>();
  const [canceling, setCanceling] = useState(false);
  const cancel = async () => {
    setCanceling(true);
    setCancelError(undefined);
    try {
      await props.conn.a2a.cancelTask({ id: reply.taskId });
    } catch (error) {
      setCancelError(describeError(error));
    } finally {
      setCanceling(false);
    }
  };
  return (
    <section class="reply" aria-label="reply" data-state={taskStateLabel(reply.state)} data-link={link}>
      <header class="reply-head">
        <StateBadge state={reply.state} />
        {reply.taskId && (
          <span>
            task <Id id={reply.taskId} />
          </span>
        )}
        <span class="muted link" aria-live="polite">
          {linkText[link]}
          {resumes > 0 ? ` (resumed ${resumes}×)` : ""}
        </span>
        <button
          type="button"
          class="danger"
          disabled={!cancelable(reply) || canceling}
          onClick={cancel}
          aria-keyshortcuts="Escape"
        >
          Cancel task
        </button>
      </header>
      <pre class="reply-text" role="log" aria-label="reply text" aria-busy={link !== "ended"}>
        {replyText(reply)}
      </pre>
      <ol class="steps" aria-label="task states">
        {reply.steps.map((s) => (
          <li key={`${s.state}`}>
            <StateBadge state={s.state} /> <Time ts={s.time} />
            {s.note && <span class="muted"> {s.note}</span>}
          </li>
        ))}
      </ol>
      <ErrorBox error={props.live.error ?? cancelError} />
    </section>
  );
}
