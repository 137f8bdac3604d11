import { Phase } from "@parley/proto";
import { useState } from "preact/hooks";
import type { Connection } from "../connection.js";
import {
  type ConverseLog,
  converseDone,
  emptyConverseLog,
  phaseProgress,
  reduceConverse,
} from "../logic/converse-log.js";
import { describeError, isNetworkError, type ShownError } from "../logic/errors.js";
import { phaseLabel, speakerLabel, stopReasonLabel } from "../logic/format.js";
import { reconnectDelayMs } from "../logic/stream-cursor.js";
import { AgentSelect, Badge, ErrorBox, Id, Time } from "./bits.js";
import { useLatestRun } from "./latest-run.js";
import { PastSessions } from "./past-sessions.js";

interface SessionFields {
  agent: string;
  contextId: string;
}

function SessionPicker(props: {
  legend: string;
  agents: readonly string[];
  value: SessionFields;
  onChange: (v: SessionFields) => void;
}) {
  return (
    <fieldset class="session">
      <legend>{props.legend}</legend>
      <AgentSelect
        agents={props.agents}
        value={props.value.agent}
        onChange={(agent) => props.onChange({ ...props.value, agent })}
      />
      <label>
        Context id
        <input
          value={props.value.contextId}
          onInput={(e) => props.onChange({ ...props.value, contextId: e.currentTarget.value })}
          placeholder="empty: a new thread"
          spellcheck={false}
        />
      </label>
    </fieldset>
  );
}

/**
 * Starts a Converse between two sessions and watches it: round one, each
 * ping-pong turn, silence, the announce step and the stop reason. The
 * conversation runs on the server (wait_ms 0) and WatchConversation follows
 * it, so a dropped connection resumes by replaying and skipping known steps.
 * Beside it, the tenant's stored sessions: picking one opens its steps.
 */
export function SessionsView(props: { conn: Connection; agents: readonly string[]; active: boolean }) {
  const { conn, agents } = props;
  const [opened, setOpened] = useState<{ id: string; log?: ConverseLog } | undefined>();
  const [openError, setOpenError] = useState<ShownError | undefined>();
  const [ended, setEnded] = useState(0);
  const open = async (conversationId: string) => {
    setOpened({ id: conversationId });
    setOpenError(undefined);
    try {
      const got = await conn.sessions.getConversation({ conversationId });
      let past = emptyConverseLog;
      for (const event of got.conversation?.events ?? []) past = reduceConverse(past, event);
      setOpened((o) => (o?.id === conversationId ? { id: conversationId, log: past } : o));
    } catch (e) {
      setOpenError(describeError(e));
    }
  };
  const [requester, setRequester] = useState<SessionFields>({ agent: agents[0] ?? "", contextId: "" });
  const [target, setTarget] = useState<SessionFields>({ agent: agents[1] ?? agents[0] ?? "", contextId: "" });
  const [text, setText] = useState("");
  const [turns, setTurns] = useState(2);
  const [log, setLog] = useState<ConverseLog | undefined>();
  const [error, setError] = useState<ShownError | undefined>();
  const [running, setRunning] = useState(false);
  const newRun = useLatestRun();

  const start = async () => {
    if (text.trim() === "" || running) return;
    const controller = newRun();
    setOpened(undefined);
    setRunning(true);
    setError(undefined);
    let current = emptyConverseLog;
    setLog(current);
    const ref = (s: SessionFields) => ({
      endpoint: { case: "agent" as const, value: s.agent },
      contextId: s.contextId.trim(),
    });
    try {
      for await (const { event } of conn.sessions.converse(
        {
          requester: ref(requester),
          target: ref(target),
          text,
          maxTurns: turns,
          waitMs: 0,
          requestId: crypto.randomUUID(),
        },
        { signal: controller.signal },
      )) {
        if (event) current = reduceConverse(current, event);
      }
      setLog(current);
      let failures = 0;
      while (!converseDone(current) && !controller.signal.aborted) {
        try {
          for await (const { event } of conn.sessions.watchConversation(
            { conversationId: current.conversationId },
            { signal: controller.signal },
          )) {
            failures = 0;
            if (event) {
              current = reduceConverse(current, event);
              setLog(current);
            }
          }
          if (!converseDone(current)) {
            const got = await conn.sessions.getConversation({ conversationId: current.conversationId });
            for (const event of got.conversation?.events ?? []) current = reduceConverse(current, event);
            setLog(current);
          }
        } catch (e) {
          if (controller.signal.aborted || !isNetworkError(e)) throw e;
          failures += 1;
          await new Promise((r) => setTimeout(r, reconnectDelayMs(failures)));
        }
      }
    } catch (e) {
      if (!controller.signal.aborted) setError(describeError(e));
    } finally {
      setRunning(false);
      setEnded((n) => n + 1);
    }
  };

  return (
    <div class="split">
      <PastSessions
        conn={conn}
        selected={opened?.id}
        onOpen={(id) => void open(id)}
        reload={ended + (props.active ? 1 : 0)}
      />
      <section class="detail-pane">
        <div class="detail sessions">
          <h2>Agent-to-agent session</h2>
          <form
            class="converse-form"
            onSubmit={(e) => {
              e.preventDefault();
              void start();
            }}
          >
            <div class="row">
              <SessionPicker legend="Requester" agents={agents} value={requester} onChange={setRequester} />
              <SessionPicker legend="Target" agents={agents} value={target} onChange={setTarget} />
              <label>
                Ping-pong turns
                <input
                  type="number"
                  min={0}
                  max={20}
                  value={turns}
                  onInput={(e) => setTurns(Number(e.currentTarget.value))}
                />
              </label>
            </div>
            <label>
              Request
              <textarea
                rows={2}
                value={text}
                onInput={(e) => setText(e.currentTarget.value)}
                onKeyDown={(e) => {
                  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
                    e.preventDefault();
                    void start();
                  }
                }}
                placeholder="What the requester asks the target (Ctrl+Enter starts)"
              />
            </label>
            <div class="row">
              <button type="submit" class="primary" disabled={running || text.trim() === ""}>
                {running ? "Running…" : "Converse"}
              </button>
            </div>
          </form>
          <ErrorBox error={error} />
          {opened ? (
            <>
              <h3>
                Session <Id id={opened.id} keep={20} />{" "}
                <button type="button" onClick={() => setOpened(undefined)}>
                  Close
                </button>
              </h3>
              <ErrorBox error={openError} />
              {opened.log && <ConversationLog log={opened.log} />}
            </>
          ) : (
            log && <ConversationLog log={log} />
          )}
        </div>
      </section>
    </div>
  );
}

function ConversationLog(props: { log: ConverseLog }) {
  const { log } = props;
  return (
    <section class="conversation" aria-label="conversation" data-phase={phaseLabel(log.phase)}>
      <ol class="phases" aria-label="phases">
        {phaseProgress(log).map((p) => (
          <li key={p.phase} class={p.reached ? "reached" : ""} data-reached={p.reached}>
            {phaseLabel(p.phase)}
          </li>
        ))}
      </ol>
      {log.conversationId && (
        <p class="muted">
          conversation <Id id={log.conversationId} keep={20} /> · requester thread{" "}
          <Id id={log.requesterContextId} keep={20} /> · target thread <Id id={log.targetContextId} keep={20} />
        </p>
      )}
      <ol class="converse-steps" aria-label="steps">
        {log.steps.map((s) => (
          <li key={s.sequence} class={`step phase-${Phase[s.phase].toLowerCase()}`}>
            <span class="seq">#{s.sequence}</span>
            <span class="phase">{phaseLabel(s.phase)}</span>
            <span class="turn">{s.phase === Phase.PING_PONG ? `turn ${s.turn}/${log.maxTurns}` : ""}</span>
            <span class="speaker">{speakerLabel(s.speaker)}</span>
            <Time ts={s.time} />
            <pre class="step-text">{s.silent ? "(stayed silent)" : s.text}</pre>
          </li>
        ))}
      </ol>
      {converseDone(log) && (
        <section class="stop" aria-label="stop reason">
          <Badge tone="idle">{`stopped: ${stopReasonLabel(log.stopReason)}`}</Badge>
          <span>{log.detail}</span>
          {log.announcedText && (
            <p>
              Announced to the target's thread: <q>{log.announcedText}</q>
            </p>
          )}
        </section>
      )}
    </section>
  );
}
