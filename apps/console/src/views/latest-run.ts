import { useCallback, useEffect, useRef } from "preact/hooks";

/**
 * One run at a time per component: starting a run aborts the previous one,
 * and unmounting aborts the last, so no stream outlives its view.
 */
export function useLatestRun(): () => AbortController {
  const current = useRef<AbortController | undefined>(undefined);
  useEffect(() => () => current.current?.abort(), []);
  return useCallback(() => {
    current.current?.abort();
    const controller = new AbortController();
    current.current = controller;
    return controller;
  }, []);
}
