/** What every command's --help ends with: the exit codes of errors.ts's ExitCode. */
export const exitCodeHelp = `
Exit codes:
  0  ok
  1  remote or agent error (server unreachable or not speaking the protocol, failed task, ...)
  2  usage error (bad flags or arguments: a bad server URL, an empty contextId, an unreadable FILE;
     bad config file, ambiguous target)
  3  target, peer or thread not found
  4  busy or conflict (another task is running in that thread)`;

/** One JSON value per line on stdout, the --json output of every command. */
export function jsonLine(value: unknown) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}
