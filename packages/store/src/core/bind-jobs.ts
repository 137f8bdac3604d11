/** The job functions of a backend: each store method's own function, taking the backend's shared context first. */
export type StoreJobs<S, C> = {
  [K in keyof S]: S[K] extends (...args: infer A) => infer R ? (ctx: C, ...args: A) => R : never;
};

/**
 * Builds a store from its backend's job functions, each call run through
 * `run` (named by its method, for errors such as CLOSED), so every backend
 * is one table of methods to modules and no two spell out the same wrapper.
 */
export function bindJobs<S extends object, C>(
  ctx: C,
  jobs: StoreJobs<S, C>,
  run: <T>(name: string, work: () => Promise<T>) => Promise<T>,
): S {
  const store: Record<string, unknown> = {};
  for (const [name, job] of Object.entries(jobs) as [string, (ctx: C, ...args: unknown[]) => Promise<unknown>][]) {
    store[name] = (...args: unknown[]) => run(name, () => job(ctx, ...args));
  }
  return store as S;
}
