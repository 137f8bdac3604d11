const finished: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * A server-streaming answer that starts on its first read, as an async
 * generator's body does, and then hands every read straight to the stream
 * `start` resolved to. An open stream keeps this one object in front of its
 * source instead of a generator frame (and one more promise per event) for
 * each `yield*` layer between the handler and the source.
 */
class LazyStream<T> implements AsyncIterableIterator<T> {
  private inner: AsyncIterator<T> | undefined;
  private starting: Promise<AsyncIterator<T>> | undefined;
  private closed = false;

  constructor(private start: (() => Promise<AsyncIterator<T>>) | undefined) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.inner) return this.inner.next();
    if (this.closed) return Promise.resolve(finished);
    this.starting ??= this.begin();
    return this.starting.then((inner) => (this.closed ? finished : inner.next()));
  }

  private async begin(): Promise<AsyncIterator<T>> {
    const start = this.start!;
    this.start = undefined;
    try {
      const inner = await start();
      // A reader that left while the stream was starting still ends what it started.
      if (this.closed) await inner.return?.();
      else this.inner = inner;
      return inner;
    } catch (error) {
      // As a generator that threw: the error goes to this read, later reads find the stream over.
      this.closed = true;
      throw error;
    }
  }

  async return(): Promise<IteratorResult<T>> {
    this.closed = true;
    const inner = this.inner;
    this.inner = undefined;
    if (inner?.return) await inner.return();
    return finished;
  }

  async throw(error: unknown): Promise<IteratorResult<T>> {
    await this.return();
    throw error;
  }
}

export function lazyStream<T>(start: () => Promise<AsyncIterator<T>>): AsyncIterableIterator<T> {
  return new LazyStream(start);
}

/** A stream of one value (module-level: a generator function declared per call gets its own hidden classes). */
export async function* oneValue<T>(value: T): AsyncGenerator<T> {
  yield value;
}
