import { execFileSync, fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL("..", import.meta.url));

/**
 * Forks a bench script and gives it a request/response channel over IPC. `cpus` (a taskset list such as "0")
 * pins the child and every thread it has or starts to those CPUs.
 */
export async function startChild(script, { env = {}, execArgv = [], cpus } = {}) {
  // An absolute path runs another checkout's script (--base): its own node_modules and builds.
  const proc = fork(script.startsWith("/") ? script : `${here}${script}`, [], {
    env: { ...process.env, ...env },
    execArgv,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  // -a: the threads Node has started by now too; later threads inherit their creator's affinity.
  if (cpus !== undefined) execFileSync("taskset", ["-a", "-p", "-c", cpus, String(proc.pid)], { stdio: "ignore" });
  const pending = new Map();
  let nextId = 1;
  const ready = new Promise((resolve, reject) => {
    const fail = (code) => reject(new Error(`${script} exited with ${code} before it was ready`));
    proc.once("exit", fail);
    proc.on("message", (msg) => {
      if (msg.ready) {
        proc.off("exit", fail);
        resolve(msg);
        return;
      }
      const waiter = pending.get(msg.id);
      if (!waiter) return;
      if (msg.phase) {
        Promise.resolve(waiter.phase?.()).then(() => proc.send({ type: "go", id: msg.id }));
        return;
      }
      pending.delete(msg.id);
      if (msg.ok) waiter.resolve(msg.value);
      else waiter.reject(new Error(`${script}: ${msg.error}`));
    });
  });
  proc.on("exit", (code) => {
    for (const w of pending.values()) w.reject(new Error(`${script} exited with ${code}`));
    pending.clear();
  });
  const info = await ready;
  return {
    info,
    proc,
    request(type, payload = {}, hooks = {}) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject, ...hooks });
        proc.send({ type, id, ...payload });
      });
    },
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.once("exit", r));
      const id = nextId++;
      proc.send({ type: "stop", id });
      const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
