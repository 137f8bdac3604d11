import type { AgentTurn, HistoryEntry } from "@parley/domain";

/** The longest stretch of the new message the summary quotes; the rest is counted, not shown. */
const quoteChars = 160;

/** Who wrote an earlier message, as the summary names it. */
function senderOf(entry: HistoryEntry): string {
  if (entry.provenance === "inter-session") return entry.source ? `${entry.source} (inter-session)` : "inter-session";
  if (entry.provenance === "imported") return entry.role ? `imported ${entry.role}` : "imported";
  return entry.provenance;
}

/**
 * The turn's place among the thread's turns: one more than the earlier messages not written as an agent's reply,
 * when the history that arrived reaches back to the thread's first message; otherwise the message's own place.
 */
function turnLabel(history: readonly HistoryEntry[]): string {
  const first = history[0];
  if (first === undefined) return "turn 1";
  if (first.sequence !== 1) return `message ${history.at(-1)!.sequence + 1} (older messages did not arrive)`;
  return `turn ${history.filter((e) => e.provenance !== "agent").length + 1}`;
}

/** The first line of `text`, at most quoteChars long, and what was left out. */
function quote(text: string): string {
  const lines = text.split("\n");
  const first = lines[0]!;
  const shown = first.length > quoteChars ? `${first.slice(0, quoteChars)}…` : first;
  const more = lines.length - 1;
  const cut = first.length > quoteChars ? first.length - quoteChars : 0;
  const rest = [
    ...(cut > 0 ? [`${cut} more character${cut === 1 ? "" : "s"}`] : []),
    ...(more > 0 ? [`${more} more line${more === 1 ? "" : "s"}`] : []),
  ];
  return rest.length > 0 ? `${shown} (+${rest.join(", ")})` : shown;
}

/** The text of a message that is one text part, else undefined. */
function singleText(turn: AgentTurn): string | undefined {
  const parts = turn.message.parts;
  return parts.length === 1 && parts[0]!.content.case === "text" ? parts[0]!.content.value : undefined;
}

/**
 * What reached the agent, in a few lines: the turn, how many earlier messages came with it and from whom, and the
 * new text (its first line; a session step's instructions above it are named and counted). Deterministic: the same
 * turn gives the same summary. When the new text alone arrived (a thread's first plain message), it is the reply.
 */
export function echoSummary(turn: AgentTurn): string {
  const history = turn.history;
  // A session step's turn text is its instructions, a blank line, then the other side's message.
  const raw = singleText(turn);
  const stepped = raw !== undefined && turn.text !== raw && turn.text.endsWith(`\n\n${raw}`);
  if (history.length === 0 && !stepped) return turn.text;
  const senders = new Map<string, number>();
  for (const entry of history) senders.set(senderOf(entry), (senders.get(senderOf(entry)) ?? 0) + 1);
  const from = [...senders].map(([sender, n]) => `${n} from ${sender}`).join(", ");
  const count =
    history.length === 0
      ? "no earlier message arrived with it"
      : `${history.length} earlier message${history.length === 1 ? "" : "s"} arrived with it (${from})`;
  const lines = [`echo: ${turnLabel(history)} of thread ${JSON.stringify(turn.contextId)}; ${count}.`];
  if (stepped) {
    const instructions = turn.text.slice(0, turn.text.length - raw.length - 2).split("\n");
    lines.push(`instructions: ${quote(instructions[0]!)} (${instructions.length} lines above the message)`);
    lines.push(`new message: ${quote(raw)}`);
  } else {
    lines.push(`new message: ${quote(turn.text)}`);
  }
  return lines.join("\n");
}
