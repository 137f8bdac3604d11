import { type Task, TaskState } from "@parley/proto";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Connection } from "../connection.js";
import { followTask, type LiveReply } from "../follow-task.js";
import { describeError, type ShownError } from "../logic/errors.js";
import { partsText, roleLabel, taskStateLabel } from "../logic/format.js";
import { currentToken, firstPage, type Pager as PagerState, withNextToken } from "../logic/paging.js";
import { applyTask, emptyReply, replyEnded } from "../logic/reply-stream.js";
import { ErrorBox, Id, StateBadge, Time } from "./bits.js";
import { PickList } from "./pick-list.js";
import { ReplyPanel } from "./reply-panel.js";

const states = [
  TaskState.SUBMITTED,
  TaskState.WORKING,
  TaskState.INPUT_REQUIRED,
  TaskState.AUTH_REQUIRED,
  TaskState.COMPLETED,
  TaskState.FAILED,
  TaskState.CANCELED,
  TaskState.REJECTED,
];

/** Tasks filtered by state and context, paged, and one task's history and artifacts. */
/** `active`: the view is shown; each time it is, the list is read again. */
export function TasksView(props: { conn: Connection; active: boolean }) {
  const { conn } = props;
  const [state, setState] = useState<TaskState>(TaskState.UNSPECIFIED);
  const [contextId, setContextId] = useState("");
  const [filter, setFilter] = useState({ state: TaskState.UNSPECIFIED, contextId: "" });
  const [pager, setPager] = useState<PagerState>(firstPage);
  const [tasks, setTasks] = useState<Task[]>([]);
  const [total, setTotal] = useState(0);
  const [selected, setSelected] = useState<string | undefined>();
  const [error, setError] = useState<ShownError | undefined>();
  const [reload, setReload] = useState(0);

  useEffect(() => {
    let live = true;
    conn.a2a
      .listTasks({
        status: filter.state,
        contextId: filter.contextId,
        pageSize: 20,
        pageToken: currentToken(pager),
        historyLength: 0,
      })
      .then(
        (res) => {
          if (!live) return;
          setTasks(res.tasks);
          setTotal(res.totalSize);
          setPager((p) => withNextToken(p, res.nextPageToken));
          setError(undefined);
        },
        (e: unknown) => live && setError(describeError(e)),
      );
    return () => {
      live = false;
    };
  }, [conn, filter, pager.index, reload, props.active]);

  return (
    <div class="split">
      <aside class="list-pane" aria-label="tasks">
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            setPager(firstPage);
            setFilter({ state, contextId: contextId.trim() });
          }}
        >
          <label>
            State
            <select value={state} onChange={(e) => setState(Number(e.currentTarget.value) as TaskState)}>
              <option value={TaskState.UNSPECIFIED}>any</option>
              {states.map((s) => (
                <option key={s} value={s}>
                  {taskStateLabel(s)}
                </option>
              ))}
            </select>
          </label>
          <label>
            Context id
            <input value={contextId} onInput={(e) => setContextId(e.currentTarget.value)} spellcheck={false} />
          </label>
          <div class="row">
            <button type="submit" class="primary">
              Filter
            </button>
            <button type="button" onClick={() => setReload((n) => n + 1)}>
              Refresh
            </button>
            <span class="muted">{total} tasks</span>
          </div>
        </form>
        <ErrorBox error={error} />
        <PickList
          items={tasks}
          idOf={(t) => t.id}
          selected={selected}
          onSelect={setSelected}
          title={(t) => (
            <>
              <StateBadge state={t.status?.state ?? TaskState.UNSPECIFIED} /> <Id id={t.id} />
            </>
          )}
          meta={(t) => (
            <>
              <Time ts={t.status?.timestamp} /> · {t.contextId}
            </>
          )}
          empty="no tasks"
          pager={pager}
          onPage={setPager}
        />
      </aside>
      <section class="detail-pane">
        {selected ? (
          <TaskDetail key={selected} conn={conn} taskId={selected} onChanged={() => setReload((n) => n + 1)} />
        ) : (
          <p class="muted detail">Pick a task to see its status, history and artifacts.</p>
        )}
      </section>
    </div>
  );
}

function TaskDetail(props: { conn: Connection; taskId: string; onChanged: () => void }) {
  const { conn, taskId } = props;
  const [task, setTask] = useState<Task | undefined>();
  const [live, setLive] = useState<LiveReply | undefined>();
  const [error, setError] = useState<ShownError | undefined>();
  const onChanged = useRef(props.onChanged);
  onChanged.current = props.onChanged;

  useEffect(() => {
    const controller = new AbortController();
    (async () => {
      try {
        const got = await conn.a2a.getTask({ id: taskId });
        setTask(got);
        const reply = applyTask(emptyReply, got);
        setLive({ reply, link: "ended", resumes: 0 });
        // A task still running is followed live, so its state changes show as they happen.
        if (!replyEnded(reply)) {
          await followTask(conn, reply, setLive, controller.signal);
          if (!controller.signal.aborted) {
            setTask(await conn.a2a.getTask({ id: taskId }));
            onChanged.current();
          }
        }
      } catch (e) {
        if (!controller.signal.aborted) setError(describeError(e));
      }
    })();
    return () => controller.abort();
  }, [conn, taskId]);

  return (
    <div class="detail">
      <header class="detail-head">
        <h2>
          Task <Id id={taskId} keep={40} />
        </h2>
        {task && <span class="muted">context {task.contextId}</span>}
      </header>
      <ErrorBox error={error} />
      {live && <ReplyPanel conn={conn} live={live} />}
      {task && (
        <>
          <h3>Status</h3>
          <p>
            <StateBadge state={task.status?.state ?? TaskState.UNSPECIFIED} /> since{" "}
            <Time ts={task.status?.timestamp} />
            {task.status?.message && <span class="muted"> {partsText(task.status.message.parts)}</span>}
          </p>
          <h3>History ({task.history.length} messages)</h3>
          <ol class="history">
            {task.history.map((m) => (
              <li key={m.messageId} class="msg">
                <div class="msg-head">
                  <span class="role">{roleLabel(m.role)}</span>
                  <Id id={m.messageId} />
                </div>
                <pre class="msg-text">{partsText(m.parts)}</pre>
              </li>
            ))}
          </ol>
          <h3>Artifacts ({task.artifacts.length})</h3>
          <ol class="history">
            {task.artifacts.map((a) => (
              <li key={a.artifactId} class="msg">
                <div class="msg-head">
                  <span class="role">{a.name || "artifact"}</span>
                  <Id id={a.artifactId} />
                </div>
                <pre class="msg-text">{partsText(a.parts)}</pre>
              </li>
            ))}
          </ol>
        </>
      )}
    </div>
  );
}
