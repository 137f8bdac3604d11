import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { TaskState } from "@parley/proto";
import type { ShownError } from "../logic/errors.js";
import { formatTime, shortId, type Tone, taskStateLabel, taskStateTone } from "../logic/format.js";

export function Badge(props: { tone: Tone; children: string; label?: string }) {
  return (
    <span class={`badge tone-${props.tone}`} title={props.label}>
      {props.children}
    </span>
  );
}

export function StateBadge(props: { state: TaskState }) {
  return (
    <Badge tone={taskStateTone(props.state)} label={`state ${taskStateLabel(props.state)}`}>
      {taskStateLabel(props.state)}
    </Badge>
  );
}

export function Time(props: { ts: Timestamp | undefined }) {
  return <time class="time">{formatTime(props.ts)}</time>;
}

export function Id(props: { id: string; keep?: number }) {
  return (
    <code class="id" title={props.id}>
      {shortId(props.id, props.keep)}
    </code>
  );
}

export function ErrorBox(props: { error: ShownError | undefined }) {
  if (!props.error) return null;
  return (
    <div class="error" role="alert">
      <strong>{props.error.title}</strong>
      <span>{props.error.detail}</span>
    </div>
  );
}

/** A labelled choice of the server's hosted agents. */
export function AgentSelect(props: { agents: readonly string[]; value: string; onChange: (agent: string) => void }) {
  return (
    <label>
      Agent
      <select value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.agents.map((a) => (
          <option key={a} value={a}>
            {a}
          </option>
        ))}
      </select>
    </label>
  );
}
