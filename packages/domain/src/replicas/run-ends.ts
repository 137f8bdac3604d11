import { endsTurn, isInterruptedState, type StreamResponse, TaskState } from "@parley/proto";

/** A published event is the last of its run when it ends the run: a final status or a direct reply. */
export function endsRun(event: StreamResponse): boolean {
  const p = event.payload;
  if (p.case === "message") return true;
  if (p.case !== "statusUpdate") return false;
  return endsTurn(p.value.status?.state ?? TaskState.UNSPECIFIED);
}

/** A run's final event after which its task goes on: it left the task waiting for the client (input, auth). */
export function leavesWaiting(event: StreamResponse): boolean {
  const p = event.payload;
  return p.case === "statusUpdate" && isInterruptedState(p.value.status?.state ?? TaskState.UNSPECIFIED);
}
