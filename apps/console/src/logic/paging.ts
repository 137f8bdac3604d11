/**
 * Page positions of a token-paged list (ListThreads, ListTasks): the token of
 * every page visited so far, so "newer" goes back without asking the server
 * for a previous-page token it does not have.
 */
export interface Pager {
  /** tokens[i] fetches page i; tokens[0] is "" (the first page). */
  readonly tokens: readonly string[];
  readonly index: number;
  /** The next page's token from the last response; "" on the last page. */
  readonly nextToken: string;
}

export const firstPage: Pager = { tokens: [""], index: 0, nextToken: "" };

export function currentToken(pager: Pager): string {
  return pager.tokens[pager.index] ?? "";
}

/** Records the response of the current page. */
export function withNextToken(pager: Pager, nextToken: string): Pager {
  return { ...pager, nextToken };
}

export function hasNext(pager: Pager): boolean {
  return pager.nextToken !== "";
}

export function hasPrevious(pager: Pager): boolean {
  return pager.index > 0;
}

export function nextPage(pager: Pager): Pager {
  if (!hasNext(pager)) return pager;
  const tokens = [...pager.tokens.slice(0, pager.index + 1), pager.nextToken];
  return { tokens, index: pager.index + 1, nextToken: "" };
}

export function previousPage(pager: Pager): Pager {
  if (!hasPrevious(pager)) return pager;
  return { tokens: pager.tokens, index: pager.index - 1, nextToken: "" };
}

/** "page 2", shown beside the buttons. */
export function pageLabel(pager: Pager): string {
  return `page ${pager.index + 1}`;
}
