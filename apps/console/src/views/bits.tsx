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

export function Pager(props: {
  label: string;
  previous: boolean;
  next: boolean;
  onPrevious: () => void;
  onNext: () => void;
}) {
  return (
    <div class="pager">
      <button type="button" disabled={!props.previous} onClick={props.onPrevious}>
        ← Newer
      </button>
      <span class="muted">{props.label}</span>
      <button type="button" disabled={!props.next} onClick={props.onNext}>
        Older →
      </button>
    </div>
  );
}
