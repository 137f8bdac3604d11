// Following page tokens for the list commands: --limit N, --all and --page-token T, with no silent cap.
import { Code, ConnectError } from "@connectrpc/connect";
import { type Command, InvalidArgumentError } from "commander";
import { UsageError } from "../errors.js";
import { terminalText } from "../terminal-text.js";
import { jsonLine } from "./output.js";

/** The paging flags as commander parsed them. */
export interface PagingOptions {
  readonly limit?: number;
  readonly all?: boolean;
  readonly pageToken?: string;
}

/** One page as an RPC answers it. */
export interface Page<T> {
  readonly items: readonly T[];
  /** Empty on the last page. */
  readonly nextPageToken: string;
}

function parseCount(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError(`expected a whole number of at least 1, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** Adds --limit, --all and --page-token to a list command. */
export function addPagingOptions(command: Command, what: string, defaultLimit: number): Command {
  return command
    .option(
      "--limit <n>",
      `how many ${what} to print (default ${defaultLimit}); more than one page is fetched page by page`,
      parseCount,
    )
    .option("--all", `print every ${what}, following page tokens to the end`)
    .option("--page-token <token>", "start where an earlier listing stopped (the token it printed)");
}

/**
 * Prints up to `limit` items (or all of them), asking for pages of at most
 * `serverMax` (the RPC's documented maximum page size), then the token of the
 * next page when there is one: in text as "next page token: T", with --json as
 * a last line {"nextPageToken": "T"}. Nothing is cut off without a token saying where to go on. `flush`, when
 * given, runs after the last item and before the token line (a table printed whole, its columns aligned).
 */
export async function printPages<T>(
  options: PagingOptions & { readonly json?: boolean },
  limits: { readonly defaultLimit: number; readonly serverMax: number },
  fetch: (pageSize: number, pageToken: string) => Promise<Page<T>>,
  print: (item: T) => void,
  flush?: () => void,
): Promise<{ readonly printed: number; readonly nextPageToken: string }> {
  if (options.all && options.limit !== undefined) throw new UsageError("--all and --limit exclude each other");
  if (options.pageToken !== undefined && options.pageToken.trim() === "") throw new UsageError("--page-token is empty");
  const wanted = options.all ? Number.POSITIVE_INFINITY : (options.limit ?? limits.defaultLimit);
  let token = options.pageToken ?? "";
  let printed = 0;
  for (;;) {
    const pageSize = Math.min(wanted - printed, limits.serverMax);
    let page: Page<T>;
    try {
      page = await fetch(pageSize, token);
    } catch (error) {
      // A token the server did not issue for this query is the caller's mistake, not the server's.
      if (token !== "" && error instanceof ConnectError && error.code === Code.InvalidArgument) {
        throw new UsageError(`--page-token ${JSON.stringify(token)} was refused: ${error.rawMessage}`);
      }
      throw error;
    }
    for (const item of page.items) print(item);
    printed += page.items.length;
    token = page.nextPageToken;
    if (token === "" || printed >= wanted) break;
  }
  flush?.();
  if (token !== "") {
    if (options.json) jsonLine({ nextPageToken: token });
    else process.stdout.write(`next page token: ${terminalText(token)}\n`);
  }
  return { printed, nextPageToken: token };
}
