import { type Context, context } from "@opentelemetry/api";

/**
 * An async iterable that passes `open()`'s values through unchanged and calls
 * `done` exactly once: when the iteration ends, fails (with the error), or is
 * abandoned by its reader (with `abandoned()`). With a span context, opening
 * and every step run inside it: a generator's body runs as it is read, so
 * that is where its spans and outgoing calls get their parent.
 */
export function watchIterable<T>(
  open: () => AsyncIterator<T>,
  done: (error?: unknown) => void,
  options: {
    readonly spanContext?: Context;
    readonly abandoned: () => unknown;
    /** Replaces a failure before it is reported and rethrown (to keep a database's text from the caller). */
    readonly mapError?: (error: unknown) => unknown;
  },
): AsyncIterable<T> {
  return { [Symbol.asyncIterator]: () => new Watched(open, done, options) };
}

/**
 * One reading of a watched iterable. A class whose steps chain on the inner read (one `then` per step), not an
 * async `next`: an open stream then holds no suspended frame per watching layer, and a step makes one promise.
 */
class Watched<T> implements AsyncIterator<T> {
  private readonly inner: AsyncIterator<T>;
  private finished = false;

  constructor(
    open: () => AsyncIterator<T>,
    private readonly done: (error?: unknown) => void,
    private readonly options: {
      readonly spanContext?: Context;
      readonly abandoned: () => unknown;
      readonly mapError?: (error: unknown) => unknown;
    },
  ) {
    this.inner = this.inSpan(open);
  }

  private inSpan<R>(call: () => R): R {
    const { spanContext } = this.options;
    return spanContext ? context.with(spanContext, call) : call();
  }

  private finish(error?: unknown): void {
    if (this.finished) return;
    this.finished = true;
    this.done(error);
  }

  next(): Promise<IteratorResult<T>> {
    let step: Promise<IteratorResult<T>>;
    try {
      step = this.options.spanContext ? this.inSpan(() => this.inner.next()) : this.inner.next();
    } catch (thrown) {
      return Promise.reject(this.failed(thrown));
    }
    return step.then(this.stepped, this.rejected);
  }

  private readonly stepped = (result: IteratorResult<T>): IteratorResult<T> => {
    if (result.done) this.finish();
    return result;
  };

  private readonly rejected = (thrown: unknown): never => {
    throw this.failed(thrown);
  };

  private failed(thrown: unknown): unknown {
    const error = this.options.mapError ? this.options.mapError(thrown) : thrown;
    this.finish(error);
    return error;
  }

  async return(value?: unknown): Promise<IteratorResult<T>> {
    this.finish(this.options.abandoned());
    return (await this.inner.return?.(value)) ?? { done: true as const, value: undefined };
  }

  async throw(error?: unknown): Promise<IteratorResult<T>> {
    this.finish(error);
    if (this.inner.throw) return this.inner.throw(error);
    throw error;
  }
}
