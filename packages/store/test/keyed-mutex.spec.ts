import { describe, expect, it } from "vitest";
import { createKeyedMutex } from "../src/level/keyed-mutex.js";

const later = () => new Promise<void>((resolve) => setTimeout(resolve, 5));

describe("createKeyedMutex", () => {
  it("runs the tasks of one key one at a time in arrival order, and other keys alongside", async () => {
    const mutex = createKeyedMutex();
    const log: string[] = [];
    const job = (name: string) => async () => {
      log.push(`${name} start`);
      await later();
      log.push(`${name} end`);
      return name;
    };
    const results = await Promise.all([
      mutex.run("a", job("a1")),
      mutex.run("a", job("a2")),
      mutex.run("b", job("b1")),
      mutex.run("a", job("a3")),
    ]);
    expect(results).toEqual(["a1", "a2", "b1", "a3"]);
    const a = log.filter((line) => line.startsWith("a"));
    expect(a).toEqual(["a1 start", "a1 end", "a2 start", "a2 end", "a3 start", "a3 end"]);
    // b1 ran while a1 was held.
    expect(log.indexOf("b1 start")).toBeLessThan(log.indexOf("a1 end"));
  });

  it("starts an uncontended task at once, and a failed or throwing task neither blocks the key nor escapes", async () => {
    const mutex = createKeyedMutex();
    let started = false;
    const first = mutex.run("k", async () => {
      started = true;
      throw new Error("first failed");
    });
    expect(started).toBe(true);
    const second = mutex.run("k", (() => {
      throw new Error("thrown before a promise");
    }) as () => Promise<never>);
    const third = mutex.run("k", async () => "ran");
    // A synchronous throw of a task that starts at once (nobody holds its key) is a rejection too.
    const alone = mutex.run("alone", (() => {
      throw new Error("thrown at once");
    }) as () => Promise<never>);
    await expect(alone).rejects.toThrow("thrown at once");
    await expect(mutex.run("alone", async () => "free again")).resolves.toBe("free again");
    await expect(first).rejects.toThrow("first failed");
    await expect(second).rejects.toThrow("thrown before a promise");
    await expect(third).resolves.toBe("ran");
    // Once the key is free again, a new task starts at once.
    await later();
    let again = false;
    void mutex.run("k", async () => {
      again = true;
    });
    expect(again).toBe(true);
  });

  it("queues a task that the running task of the same key starts, even from its synchronous start", async () => {
    const mutex = createKeyedMutex();
    const log: string[] = [];
    let inner: Promise<void> | undefined;
    await mutex.run("k", async () => {
      log.push("outer start");
      inner = mutex.run("k", async () => {
        log.push("inner");
      });
      await later();
      log.push("outer end");
    });
    await inner;
    expect(log).toEqual(["outer start", "outer end", "inner"]);
  });
});
