#!/usr/bin/env node
// The `parley` CLI: global options and the commands (one file each under commands/) wired into commander.
import { Code, ConnectError } from "@connectrpc/connect";
import { Command, CommanderError, Option } from "commander";
import { httpVersions } from "./client.js";
import { CommandContext, type GlobalOptions, type RunCommand } from "./commands/command-context.js";
import { registerConverseCommand } from "./commands/converse.js";
import { registerTenantTransferCommands } from "./commands/export-all.js";
import { exitCodeHelp, jsonLine } from "./commands/output.js";
import { registerSendCommand } from "./commands/send.js";
import { registerSessionsCommand } from "./commands/sessions.js";
import { registerThreadsCommand } from "./commands/threads.js";
import { registerThreadTransferCommands } from "./commands/threads-transfer.js";
import { cliProtocols } from "./config.js";
import { ExitCode, exitCodeOf } from "./errors.js";
import { terminalText } from "./terminal-text.js";

function buildProgram(run: RunCommand): Command {
  const program = new Command("parley")
    .description("Talk to agents through a Parley server, or directly over A2A")
    .option("--server <url>", "Parley server URL (default: config, PARLEY_SERVER, http://127.0.0.1:8081)")
    .addOption(
      new Option(
        "--protocol <protocol>",
        "wire protocol to the server and URL targets; rest: A2A HTTP+JSON for sends (to the server's bridge port, or --to URL)",
      ).choices(cliProtocols),
    )
    .addOption(
      new Option(
        "--http-version <version>",
        "HTTP version of Connect and gRPC-Web: 2 (h2c, the server's port; default: config, 2) or 1.1 (also the bridge's port, e.g. http://127.0.0.1:8080); gRPC is always HTTP/2",
      ).choices(httpVersions),
    )
    .option("--token <token>", "bearer token for the server (default: config, PARLEY_TOKEN)")
    .option("--config <file>", "client config (default: PARLEY_CLIENT_CONFIG, ~/.config/parley/config.json)")
    .addHelpText("after", exitCodeHelp)
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();
  registerSendCommand(program, run);
  registerConverseCommand(program, run);
  registerSessionsCommand(program, run);
  registerThreadTransferCommands(registerThreadsCommand(program, run), run);
  registerTenantTransferCommands(program, run);
  return program;
}

async function main(argv: string[]): Promise<number> {
  // A reader that stops early (parley ... | head) is not an error of ours.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(ExitCode.ok);
    throw error;
  });
  let exitCode: number = ExitCode.ok;
  let json = false;
  const program: Command = buildProgram(async (action) => {
    const options = program.opts<GlobalOptions>();
    json = argv.includes("--json");
    let context: CommandContext | undefined;
    try {
      context = new CommandContext(options);
      exitCode = await action(context);
    } catch (error) {
      exitCode = exitCodeOf(error);
      const message = error instanceof ConnectError ? error.rawMessage : (error as Error).message;
      const code = error instanceof ConnectError ? ` (${Code[error.code]})` : "";
      // Error texts echo ids and server words; --json gets them exact.
      process.stderr.write(`parley: ${terminalText(message)}${code}\n`);
      if (json) jsonLine({ type: "error", exitCode, message });
    } finally {
      context?.close();
    }
  });
  if (argv.length <= 2) {
    program.outputHelp();
    return ExitCode.usage;
  }
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    throw error;
  }
  return exitCode;
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`parley: unexpected failure: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = ExitCode.remote;
  },
);
