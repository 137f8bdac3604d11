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
  const { spanContext } = options;
  const inSpan = <R>(call: () => R): R => (spanContext ? context.with(spanContext, call) : call());
  return {
    [Symbol.asyncIterator]() {
      const inner = inSpan(open);
      let finished = false;
      const finish = (error?: unknown) => {
        if (finished) return;
        finished = true;
        done(error);
      };
      return {
        async next() {
          try {
            const result = await inSpan(() => inner.next());
            if (result.done) finish();
            return result;
          } catch (thrown) {
            const error = options.mapError ? options.mapError(thrown) : thrown;
            finish(error);
            throw error;
          }
        },
        async return(value?: unknown) {
          finish(options.abandoned());
          return (await inner.return?.(value)) ?? { done: true as const, value: undefined };
        },
        async throw(error?: unknown) {
          finish(error);
          if (inner.throw) return inner.throw(error);
          throw error;
        },
      };
    },
  };
}
