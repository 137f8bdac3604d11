/** One server-sent event: its `event:` name (empty for the default) and its data lines joined by newlines. */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
}

/**
 * The events of a text/event-stream body, in order (comments and `id:`/`retry:` lines skipped). An event
 * longer than `maxEventChars` characters throws, so a peer cannot make this process hold an unbounded event.
 */
export async function* sseEvents(body: AsyncIterable<Uint8Array>, maxEventChars: number): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffered = "";
  let event = "";
  let data: string[] = [];
  let size = 0;
  const line = (text: string): SseEvent | undefined => {
    if (text === "") {
      const done = data.length > 0 ? { event, data: data.join("\n") } : undefined;
      event = "";
      data = [];
      size = 0;
      return done;
    }
    if (text.startsWith(":")) return undefined;
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      size += value.length;
      if (size > maxEventChars) throw new Error(`an event longer than ${maxEventChars} characters`);
      data.push(value);
    } else if (field === "event") event = value;
    return undefined;
  };
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let end = buffered.search(/\r\n|\r|\n/); end >= 0; end = buffered.search(/\r\n|\r|\n/)) {
      // A CR that ends the chunk may be the first half of a CRLF: its line waits for the next chunk.
      if (end === buffered.length - 1 && buffered[end] === "\r") break;
      const text = buffered.slice(0, end);
      buffered = buffered.slice(buffered.startsWith("\r\n", end) ? end + 2 : end + 1);
      const done = line(text);
      if (done) yield done;
    }
    if (buffered.length > maxEventChars) throw new Error(`an event longer than ${maxEventChars} characters`);
  }
  buffered += decoder.decode();
  if (buffered !== "") {
    const done = line(buffered);
    if (done) yield done;
  }
  const last = line("");
  if (last) yield last;
}
